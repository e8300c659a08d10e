"""``gem audit``: play generic reward-hack strategies against an env and flag those that earn
more than an honest baseline by more than chance explains.

An env may help the audit with two optional methods (both read the current state, after
``reset`` or a ``step``; neither may change it):

``audit_answers() -> (right, wrong)``
    a right and a wrong in-format action for the current state (either may be ``None``).
    With it the honest baseline plays ``wrong`` (so what luck earns is not in the baseline) and
    the audit also plays ``right``, to call a strategy *severe* when it earns as much. Without
    it the baseline plays :meth:`gem.Env.sample_random_action` (random in-format answers: what
    their lucky hits earn is in the baseline) and nothing is called severe.
``audit_strategies() -> {name: function(turn) -> action}``
    the env's own known cases, played beside the generic battery (:mod:`gem.audit.strategies`);
    ``turn`` is a :class:`gem.audit.strategies.Turn`.

Whole families add cases through :data:`gem.audit.strategies.FAMILY_STRATEGIES` (id prefix ->
strategies), a table rather than a plugin hook so that gem-core's plugin catalog is unchanged.
"""

from gem.audit.play import audit_env
from gem.audit.report import EnvAudit, StrategyResult
from gem.audit.strategies import FAMILY_STRATEGIES, GENERIC, Strategy, Turn

__all__ = ["FAMILY_STRATEGIES", "GENERIC", "EnvAudit", "Strategy", "StrategyResult", "Turn", "audit_env"]
