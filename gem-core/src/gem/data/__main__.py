"""``python -m gem.data``: the same as ``gem data``."""

import sys

from gem.data.command import main

sys.exit(main(sys.argv[1:]))
