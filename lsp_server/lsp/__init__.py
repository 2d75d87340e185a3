"""The LSP front end: the server, the wire, the editor over LSP, a module per feature."""
