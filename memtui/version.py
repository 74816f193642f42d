"""memtui's version: one place, imported by the package, the cache and the CLI."""

__version__ = "0.1.0"
