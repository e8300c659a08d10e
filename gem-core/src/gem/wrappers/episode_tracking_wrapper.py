"""The reference GEM package's module path, resolved to ours (gem.compat.become_reference)."""

from gem.compat import become_reference

become_reference(__name__)
