"""Multi-agent envs: the API (:class:`MultiAgentEnv`, :class:`AgentSelector`), a
single-agent view against fixed opponents (:class:`OpponentEnv`) and a runner with a
policy per agent or one shared policy (:func:`run`, :func:`run_multiagent_episodes`).

>>> from gem.multiagent import MultiAgentEnv, AgentSelector, OpponentEnv
"""

from gem.multiagent.check import check_multiagent_env
from gem.multiagent.env import AgentSelector, MultiAgentEnv, MultiStepResult
from gem.multiagent.opponent import OpponentEnv
from gem.multiagent.runner import MultiAgentTrajectory, make_game, run, run_multiagent_episodes

__all__ = [
    "AgentSelector",
    "MultiAgentEnv",
    "MultiAgentTrajectory",
    "MultiStepResult",
    "OpponentEnv",
    "check_multiagent_env",
    "make_game",
    "run",
    "run_multiagent_episodes",
]
