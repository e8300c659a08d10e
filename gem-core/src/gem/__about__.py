"""The reference GEM package's gem.__about__."""

from gem._version import __version__

__all__ = ["__version__"]
