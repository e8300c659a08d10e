"""The taskset package ``vf-eval gem_verifiers`` imports (verifiers resolves a taskset id to a
top-level module): GEM's adapter, re-exported. Put this folder on PYTHONPATH."""

from gem_integrations.verifiers import *  # noqa: F403
from gem_integrations.verifiers import __all__  # noqa: F401
