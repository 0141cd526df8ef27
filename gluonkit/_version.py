"""The package version, in a module of its own so that runtime code can read it without importing ``gluonkit``."""

__version__ = "0.1.0"
