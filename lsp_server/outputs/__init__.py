"""Rich outputs: MIME bundles and their files, what a view shows, the local page."""
