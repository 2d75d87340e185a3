"""Debugging in the folder's kernel (DAP): `session` is one editor's debug session."""
