"""The `runfix` command line: a module per subcommand (`run` drives the flow headless)."""
