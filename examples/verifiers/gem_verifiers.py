"""The taskset package ``vf-eval gem_verifiers`` imports (verifiers resolves a taskset id to a
top-level module): GEM's adapter, re-exported. Put this folder on PYTHONPATH."""

from gem.integrations.verifiers import *  # noqa: F403
from gem.integrations.verifiers import __all__  # noqa: F401
