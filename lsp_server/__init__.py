"""The protocol side of runfix: a pygls language server over the executors."""

__version__ = "0.1.0"
