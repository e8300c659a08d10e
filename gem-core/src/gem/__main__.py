"""``python -m gem``: the ``gem`` command (``gem list``, ``gem info``, ``gem play``, ...)."""

import sys

from gem.cli import main

if __name__ == "__main__":
    sys.exit(main())
