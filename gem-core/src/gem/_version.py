"""gem-core's version (one place: ``gem.__version__`` and ``gem --version`` read it)."""

__version__ = "0.1.0"
