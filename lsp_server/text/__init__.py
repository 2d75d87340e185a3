"""What runfix reads in a document's text, without running it: cells (`cells`), the dataflow
map of the cells (`dataflow`), prompts (`prompts`), LSP positions (`positions`); and the
frames LSP's and DAP's messages travel in (`frames`)."""
