"""The package's version, in the bottom layer so that the command line can say it."""

__version__ = "0.1.0"
