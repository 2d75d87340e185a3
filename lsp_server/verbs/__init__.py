"""What a command does, one module a verb: running cells (`cells`), fixing (`fix`),
generating (`generate`), the project's tests (`tests`), installing (`install`), the
kernel's controls (`kernel`) and the folder's trust (`trust`). A verb imports the services
(`lsp_server.services`) and the leaves, never the face (`flow`) or another verb."""
