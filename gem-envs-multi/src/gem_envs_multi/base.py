"""What the games here share: moves in ``\\boxed{}``, per-agent feedback, format errors, the end.

A game subclasses :class:`TextGame`, names its agents and mode, and implements
:meth:`TextGame.new_episode` (draw from ``self.rng``), :meth:`TextGame.view` (what an agent
sees) and :meth:`TextGame.play` (apply the parsed moves of the active agents). The base:

- reads each action's move from its last ``\\boxed{}`` (:meth:`TextGame.parse_move`);
  an action without one, or with an unreadable move, is a format error: that agent gets
  -0.1, the others 0, and the game ends (GEM's convention); ``info["format_error"]`` is
  True for that agent on that step and False on every other step;
- keeps each agent's latest feedback (``self.notes``), which :meth:`observe` shows above
  the view, so an agent sees what happened since its last move;
- ends the game at ``max_steps`` (truncation, rewards 0) and keeps ``result``, the text
  every agent sees once it is over;
- snapshots ``notes``, ``result`` and ``steps`` around the game's own fields.
"""

from __future__ import annotations

from typing import Any

from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem.multiagent import AgentSelector, MultiAgentEnv, MultiStepResult
from gem.parsing import last_boxed

NO_EPISODE = "No episode is running: call reset() to start one."


class TextGame(MultiAgentEnv):
    """A text game of named agents that move in ``\\boxed{}``; see the module docstring."""

    agent_names: tuple[str, ...] = ("player_0", "player_1")
    mode = "sequential"
    #: the format-error explanation, e.g. "no column in \\boxed{}"
    format_hint = "no move found in \\boxed{}"

    def __init__(self, max_steps: int = 100) -> None:
        super().__init__()
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.max_steps = max_steps
        self.possible_agents = list(self.agent_names)
        self.agent_selector = AgentSelector(self.possible_agents, mode=self.mode)
        self.notes: dict[str, str] = {}
        self.result = NO_EPISODE
        self.steps = 0

    # -- hooks ------------------------------------------------------------------------
    def new_episode(self) -> None:
        """Draw the episode from ``self.rng`` and reset the game's fields."""

    def rules(self, agent: str) -> str:
        """The rules as ``agent`` reads them (shown in every observation)."""
        raise NotImplementedError

    def view(self, agent: str) -> str:
        """The position as ``agent`` sees it now (hidden information stays hidden)."""
        raise NotImplementedError

    def parse_move(self, agent: str, boxed: str) -> Any | None:
        """The move in the content of the last ``\\boxed{}``, or None (a format error)."""
        raise NotImplementedError

    def play(self, moves: dict[str, Any]) -> dict[str, float] | None:
        """Apply the active agents' parsed moves and write feedback to ``self.notes``; call
        :meth:`finish` when the game ends. Returns this step's rewards (None: all 0)."""
        raise NotImplementedError

    # -- the flow ---------------------------------------------------------------------
    @property
    def over(self) -> bool:
        """The game has ended (:meth:`finish` was called), or no episode was started."""
        return bool(self.result)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed)
        self.steps = 0
        self.notes = {agent: "" for agent in self.possible_agents}
        self.result = ""
        self.new_episode()
        return {a: self.observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def observe(self, agent: str) -> str:
        if self.result == NO_EPISODE:
            return NO_EPISODE
        parts = [self.rules(agent)]
        if self.notes.get(agent):
            parts.append(self.notes[agent])
        parts.append(self.view(agent))
        if self.over:
            parts.append(self.result)
        elif agent in self.active_agents:
            parts.append("Your move.")
        else:
            parts.append("Wait for the other player.")
        return "\n\n".join(p for p in parts if p)

    def tell(self, agent: str, text: str) -> None:
        """Add ``text`` to what ``agent`` reads above the position until it moves again."""
        self.notes[agent] = f"{self.notes[agent]} {text}".strip()

    def finish(self, result: str, truncated: bool = False) -> None:
        """End the game for every agent with ``result`` as the closing text."""
        self.result = result
        for agent in self.agents:
            (self.truncations if truncated else self.terminations)[agent] = True

    def _process_actions(self, actions: dict[str, str]) -> MultiStepResult:
        self.steps += 1
        for agent in actions:
            self.notes[agent] = ""
        moves: dict[str, Any] = {}
        for agent, action in actions.items():
            boxed = last_boxed(action)
            move = self.parse_move(agent, boxed) if boxed is not None else None
            if move is None:
                return self._format_error(agent, actions)
            moves[agent] = move
        rewards = {agent: 0.0 for agent in self.agents} | (self.play(moves) or {})
        infos: dict[str, dict] = {agent: {FORMAT_ERROR: False} for agent in self.agents}
        if self.over:
            for agent in self.agents:
                infos[agent]["won"] = infos[agent]["correct"] = rewards.get(agent, 0.0) >= 1.0
        elif self.steps >= self.max_steps:
            self.finish(f"The game is over: the {self.max_steps}-step limit was reached.", truncated=True)
        observations = {agent: self.observe(agent) for agent in self.agents}
        return observations, rewards, self.terminations, self.truncations, infos

    def _format_error(self, offender: str, actions: dict[str, str]) -> MultiStepResult:
        self.finish(f"The game is over: {offender} made a format error ({self.format_hint}).")
        rewards = {agent: (FORMAT_ERROR_REWARD if agent == offender else 0.0) for agent in self.agents}
        infos = {agent: {FORMAT_ERROR: agent == offender} for agent in self.agents}
        observations = {agent: self.observe(agent) for agent in self.agents}
        return observations, rewards, self.terminations, self.truncations, infos

    def get_state(self, agent: str | None = None) -> Any:
        state = super().get_state(agent)
        if agent is None:
            state["base"] = {"notes": dict(self.notes), "result": self.result, "steps": self.steps}
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        base = state["base"]
        self.notes, self.result, self.steps = dict(base["notes"]), base["result"], base["steps"]
