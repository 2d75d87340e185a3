"""The run record (`.runfix/runs.db`) and what is made from it: notebooks, CI formats."""
