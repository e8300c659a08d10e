"""The multi-agent Env API: several named agents, per-agent observations, rewards and ends.

Compatible with the reference package's ``gem.envs.multiagent`` (``MultiAgentEnv``,
``AgentSelector``): ``step`` takes ``{agent: action}`` for the active agents and returns
five dicts keyed by agent; an :class:`AgentSelector` says who acts (one agent at a time in
``"sequential"`` mode, all at once in ``"parallel"`` mode). Because :class:`MultiAgentEnv`
is a :class:`gem.Env`, it is registered, seeded (``self.rng``), snapshotted
(``get_state()`` / ``set_state``) and spawned like any other env; to use single-agent
tools (``check_env``, ``gem play``, ``gem eval``, trainers) put it behind
:class:`gem.multiagent.OpponentEnv`.

>>> class Echo(MultiAgentEnv):
...     def __init__(self):
...         super().__init__()
...         self.possible_agents = ["a", "b"]
...         self.agent_selector = AgentSelector(self.possible_agents, mode="sequential")
...     def observe(self, agent):
...         return f"{agent}: your move"
...     def _process_actions(self, actions):
...         (agent, action), = actions.items()
...         self.terminations = {name: True for name in self.agents}
...         return {agent: "done"}, {agent: float(action == "hi")}, self.terminations, self.truncations, {}
>>> env = Echo()
>>> obs, infos = env.reset(seed=0)
>>> env.active_agents
['a']
>>> env.step({"a": "hi"})[1]
{'a': 1.0}
"""

from __future__ import annotations

import abc
import copy
from typing import Any

from gem.core import Env

#: what ``step`` returns: observations, rewards, terminations, truncations, infos (each keyed by agent)
MultiStepResult = tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict]]

MODES = ("sequential", "parallel")


class AgentSelector:
    """Who acts next: one agent at a time in turn (``"sequential"``) or all agents at once (``"parallel"``).

    >>> selector = AgentSelector(["a1", "a2"])
    >>> selector.selected, selector.is_first()
    ('a1', True)
    >>> selector.next(); selector.selected, selector.is_last()
    ('a2', True)
    >>> AgentSelector(["a1", "a2"], mode="parallel").get_active_agents()
    ['a1', 'a2']
    """

    def __init__(self, agents: list[str], mode: str = "sequential") -> None:
        # an unknown mode fails on first use, as in the reference package
        self.mode = mode
        self.reinit(agents)

    def get_active_agents(self) -> list[str]:
        """The agents expected to act in the next ``step``."""
        if self.mode == "sequential":
            return [self.selected] if self.selected is not None else []
        if self.mode == "parallel":
            return list(self._agents)
        raise ValueError(f"Unknown mode: {self.mode!r} (use one of {', '.join(MODES)})")

    def next(self) -> None:
        """Pass the turn to the next agent (sequential mode; parallel mode has no turn)."""
        if self.mode == "sequential" and self._agents:
            self._current_idx = (self._current_idx + 1) % len(self._agents)
            self.selected = self._agents[self._current_idx]

    def is_first(self) -> bool:
        return self._current_idx == 0

    def is_last(self) -> bool:
        return self._current_idx == len(self._agents) - 1

    def reinit(self, agents: list[str]) -> None:
        """Start over with ``agents``, the first one selected."""
        self._agents = list(agents)
        self._current_idx = 0
        self.selected: str | None = self._agents[0] if self._agents else None

    def add_agent(self, agent: str) -> None:
        """Append ``agent`` to the turn order (no-op when present)."""
        if agent not in self._agents:
            self._agents.append(agent)

    def remove_agent(self, agent: str) -> None:
        """Drop ``agent``; the turn stays with the agent that would have had it."""
        if agent not in self._agents:
            return
        index = self._agents.index(agent)
        self._agents.remove(agent)
        if not self._agents:
            self._current_idx, self.selected = 0, None
            return
        if index <= self._current_idx:
            self._current_idx = max(0, self._current_idx - 1)
        self._current_idx %= len(self._agents)
        self.selected = self._agents[self._current_idx]

    def state(self) -> dict[str, Any]:
        """JSON snapshot (for :meth:`MultiAgentEnv.get_state`)."""
        return {"mode": self.mode, "agents": list(self._agents), "index": self._current_idx,
                "selected": self.selected}

    def load_state(self, state: dict[str, Any]) -> None:
        self.mode, self._agents = state["mode"], list(state["agents"])
        self._current_idx, self.selected = state["index"], state["selected"]


class MultiAgentEnv(Env):
    """Base class of multi-agent envs (the reference package's API on :class:`gem.Env`).

    Subclasses set ``possible_agents`` (and usually ``agent_selector``) in ``__init__``
    and implement :meth:`observe` and :meth:`_process_actions`; games with an episode to
    draw override :meth:`reset` (calling ``super().reset(seed)`` first, then drawing from
    ``self.rng``). For :meth:`get_state` / :meth:`set_state`, subclasses return their own
    fields from :meth:`game_state` and restore them in :meth:`load_game_state`. For
    :class:`~gem.multiagent.OpponentEnv`, they implement :meth:`sample_random_action`
    and may offer scripted players through :meth:`scripted_action`.

    Differences from the reference (its behaviour was a bug): ``step`` returns copies of
    the termination/truncation dicts taken before dead agents are removed, so an agent
    that has just finished is still in them; agents that finished stop receiving turns.
    """

    #: names of the scripted players :meth:`scripted_action` knows (``"random"`` is always one)
    scripted_players: tuple[str, ...] = ("random",)
    #: the scripted player :class:`~gem.multiagent.OpponentEnv` uses when none is named
    default_opponent: str = "random"

    def __init__(self) -> None:
        self.possible_agents: list[str] = []
        self.agents: list[str] = []
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.rewards: dict[str, float] = {}
        self.infos: dict[str, dict] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.agent_selector: AgentSelector | None = None
        self.shared_memory: list[dict[str, str]] = []
        self.global_context = ""

    # -- hooks ------------------------------------------------------------------------
    @abc.abstractmethod
    def observe(self, agent: str) -> str:
        """What ``agent`` sees now."""

    @abc.abstractmethod
    def _process_actions(self, actions: dict[str, str]) -> MultiStepResult:
        """Apply the active agents' actions; set ``self.terminations`` / ``self.truncations``
        for agents whose episode ends, and return (observations, rewards, terminations,
        truncations, infos), each keyed by agent."""

    def game_state(self) -> dict[str, Any]:
        """The subclass's own fields for :meth:`get_state` (JSON-serialisable)."""
        return {}

    def load_game_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`game_state` returned."""

    def sample_random_action(self, agent: str | None = None) -> str:  # type: ignore[override]
        """A random action for ``agent`` (default: the first active agent) in the env's format."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample_random_action()")

    def scripted_action(self, agent: str, player: str) -> str:
        """The action scripted ``player`` (one of :attr:`scripted_players`) takes as ``agent`` now.

        Scripted players are part of the env: they may read its hidden state (their own
        private values), and draw only from ``self.rng``, so seeded episodes replay.
        """
        if player == "random":
            return self.sample_random_action(agent)
        raise ValueError(f"{type(self).__name__} has no scripted player {player!r}; "
                         f"it has {', '.join(self.scripted_players)}")

    # -- the episode ------------------------------------------------------------------
    @property
    def active_agents(self) -> list[str]:
        """The agents that must act in the next :meth:`step`."""
        if self.agent_selector is None:
            return list(self.agents)
        return [a for a in self.agent_selector.get_active_agents() if a in self.agents]

    @property
    def done(self) -> bool:
        """No agent is left to act: the episode is over."""
        return not self.agents

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[dict[str, str], dict[str, Any]]:  # type: ignore[override]
        """Start an episode; returns ``({agent: observation}, {agent: info})``.

        Subclasses that draw an episode call ``super().reset(seed)`` first and return
        fresh observations afterwards (``{a: self.observe(a) for a in self.agents}``).
        """
        super().reset(seed)
        self.agents = list(self.possible_agents)
        self.terminations = {agent: False for agent in self.agents}
        self.truncations = {agent: False for agent in self.agents}
        self.rewards = {agent: 0.0 for agent in self.agents}
        self.infos = {agent: {} for agent in self.agents}
        self._cumulative_rewards = {agent: 0.0 for agent in self.agents}
        self.shared_memory = []
        self.global_context = ""
        if self.agent_selector is not None:
            self.agent_selector.reinit(self.agents)
        return {agent: self.observe(agent) for agent in self.agents}, {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, str]) -> MultiStepResult:  # type: ignore[override]
        """Apply ``{agent: action}`` for exactly the active agents (any strings: a
        malformed action is the game's business, a reward); returns five dicts keyed by agent.

        Raises ``ValueError`` when ``actions`` is not a dict, misses an active agent or
        names an agent that is not active (the caller's mistake, not the agent's).
        """
        if not isinstance(actions, dict):
            raise ValueError(f"Actions must be a dict of agent -> action, got {type(actions).__name__}")
        active = self.active_agents
        missing = [a for a in active if a not in actions]
        if missing:
            raise ValueError(f"Missing action for active agent {missing[0]} (active: {active})")
        extra = [a for a in actions if a not in active]
        if extra:
            raise ValueError(f"Agent {extra[0]} provided action but is not active (active: {active})")
        observations, rewards, terminations, truncations, infos = self._process_actions(
            {agent: str(action) for agent, action in actions.items()})
        terminations, truncations = dict(terminations), dict(truncations)
        for agent, reward in rewards.items():
            if agent in self._cumulative_rewards:
                self._cumulative_rewards[agent] += float(reward)
            self.rewards[agent] = float(reward)
        self._remove_dead_agents()
        if self.agent_selector is not None:
            self.agent_selector.next()
        return observations, rewards, terminations, truncations, infos

    # -- state ------------------------------------------------------------------------
    def get_state(self, agent: str | None = None) -> Any:  # type: ignore[override]
        """With no argument: a JSON snapshot for :meth:`set_state` (gem's Env API).

        With ``agent`` (the reference's API): ``(observation, cumulative reward,
        terminated, truncated, info)`` of that agent.
        """
        if agent is not None:
            if agent not in self.agents:
                raise ValueError(f"Agent {agent} not in environment (agents: {self.agents})")
            return (self.observe(agent), self._cumulative_rewards.get(agent, 0.0),
                    self.terminations.get(agent, False), self.truncations.get(agent, False),
                    self.infos.get(agent, {}))
        return copy.deepcopy({
            "agents": self.agents, "terminations": self.terminations, "truncations": self.truncations,
            "rewards": self.rewards, "infos": self.infos, "cumulative_rewards": self._cumulative_rewards,
            "selector": self.agent_selector.state() if self.agent_selector is not None else None,
            "shared_memory": self.shared_memory, "global_context": self.global_context,
            "rng": self.rng_state(), "game": self.game_state(),
        })

    def set_state(self, state: dict[str, Any]) -> None:
        state = copy.deepcopy(state)
        self.agents = state["agents"]
        self.terminations, self.truncations = state["terminations"], state["truncations"]
        self.rewards, self.infos = state["rewards"], state["infos"]
        self._cumulative_rewards = state["cumulative_rewards"]
        if state["selector"] is not None:
            if self.agent_selector is None:
                self.agent_selector = AgentSelector([])
            self.agent_selector.load_state(state["selector"])
        self.shared_memory, self.global_context = state["shared_memory"], state["global_context"]
        self.set_rng_state(state["rng"])
        self.load_game_state(state["game"])

    def get_active_states(self) -> dict[str, tuple[str, float, bool, bool, dict]]:
        """:meth:`get_state` of every active agent."""
        return {agent: self.get_state(agent) for agent in self.active_agents}

    # -- agents and messages ------------------------------------------------------------
    def add_agent(self, agent_id: str) -> None:
        """Add an agent mid-episode (no-op when present)."""
        if agent_id in self.agents:
            return
        self.agents.append(agent_id)
        self.terminations[agent_id] = self.truncations[agent_id] = False
        self.rewards[agent_id] = self._cumulative_rewards[agent_id] = 0.0
        self.infos[agent_id] = {}
        if self.agent_selector is not None:
            self.agent_selector.add_agent(agent_id)

    def remove_agent(self, agent_id: str) -> None:
        """Remove an agent and its bookkeeping (no-op when absent)."""
        if agent_id not in self.agents:
            return
        self.agents.remove(agent_id)
        for table in (self.terminations, self.truncations, self.rewards, self.infos, self._cumulative_rewards):
            table.pop(agent_id, None)
        if self.agent_selector is not None:
            self.agent_selector.remove_agent(agent_id)

    def _remove_dead_agents(self) -> None:
        for agent in [a for a in self.agents if self.terminations.get(a) or self.truncations.get(a)]:
            self.remove_agent(agent)

    def send_message(self, from_agent: str, to_agent: str, message: str) -> None:
        """Record a message from one agent to another in :attr:`shared_memory`."""
        if from_agent not in self.agents:
            raise ValueError(f"Sender {from_agent} not in environment")
        if to_agent not in self.agents:
            raise ValueError(f"Receiver {to_agent} not in environment")
        self.shared_memory.append({"from": from_agent, "to": to_agent, "message": message})

    def broadcast_message(self, from_agent: str, message: str) -> None:
        """:meth:`send_message` to every other agent."""
        if from_agent not in self.agents:
            raise ValueError(f"Sender {from_agent} not in environment")
        for agent in self.agents:
            if agent != from_agent:
                self.shared_memory.append({"from": from_agent, "to": agent, "message": message})
