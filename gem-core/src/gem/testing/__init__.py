"""The testing kit for env authors: ``check_env`` and pytest fixtures.

>>> from gem.testing import check_env
>>> check_env(gem.make("game:GuessTheNumber-v0-easy"))  # doctest: +SKIP

The fixtures (``gem_registry``, ``gem_catalog``) come from the pytest plugin
``gem.testing.pytest_plugin``, which pytest loads automatically once gem-core is
installed.
"""

from gem.testing.check import ADVERSARIAL_ACTIONS, CheckEnvError, CheckReport, CheckResult, check_env
from gem.testing.episodes import scripted_return

__all__ = ["ADVERSARIAL_ACTIONS", "CheckEnvError", "CheckReport", "CheckResult", "check_env", "scripted_return"]
