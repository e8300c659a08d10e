"""A multi-agent game as a single-agent Env: one seat is the agent, fixed policies play the others.

This is what the ``multi:`` ids make, so every single-agent tool works on a multi-agent
game unchanged: ``check_env``, ``gem play`` (you against the scripted opponent),
``gem eval`` (a model against it; pick the opponent with
``--env-kwargs '{"opponent": "random"}'``), the runner and the trainers.

An opponent is one of:

- the name of a scripted player of the game (``game.scripted_players``: ``"random"``
  always, and e.g. ``"solver"``); it may read the game's hidden state and draws from the
  game's RNG, so seeded episodes replay exactly;
- ``"model:SPEC"``, a model ``gem eval`` can run (``model:openai:NAME``,
  ``model:http://HOST/v1``, ``model:vllm:PATH``), asked with the opponent's observation
  as one user message (``opponent_base_url`` for ``openai:`` models; needs gem-evals);
- a callable ``observation -> action`` (another policy of your own);
- a dict ``{agent: one of the above}`` for games with more than two seats.

>>> env = gem.make("multi:TicTacToe-v0")            # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                    # you are X, the solver is O   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

from gem.core import Env
from gem.errors import EntryPointError, install_hint
from gem.multiagent.env import MultiAgentEnv
from gem.registry import load_entry_point

OVER = "The game is over: call reset() to start a new one."

#: the entry-point group whose ``model`` entry builds ``model:SPEC`` opponents:
#: ``factory(spec, base_url) -> (observation -> action)`` (gem-evals provides it)
OPPONENT_GROUP = "gem.opponents"


def _model_opponent(spec: str, base_url: str | None) -> Callable[[str], str]:
    found = list(metadata.entry_points(group=OPPONENT_GROUP, name="model"))
    if not found:
        raise EntryPointError(f"opponent 'model:{spec}' is a chat model that the eval toolkit runs; install it "
                              f"{install_hint('gem-evals')}")
    return found[0].load()(spec, base_url)


class OpponentEnv(Env):
    """``game`` with ``seat`` played through ``reset``/``step`` and the other seats by ``opponent``.

    ``game`` is a :class:`MultiAgentEnv`, its class, or ``"module:Class"`` (built with
    ``game_kwargs``); ``seat`` an agent name, ``"random"`` (drawn at each reset) or None
    (the first agent). The reward of a step is everything the seat earned from its move
    until its next turn (the opponents' replies included); ``info`` holds the seat's info
    from the game and ``opponent_actions`` (what the others did, in order).
    """

    def __init__(self, game: str | type | MultiAgentEnv, opponent: Any = None, seat: str | None = None,
                 opponent_base_url: str | None = None, **game_kwargs: Any) -> None:
        if isinstance(game, MultiAgentEnv):
            if game_kwargs:
                raise TypeError("game_kwargs apply only when game is a class or 'module:Class'")
            self.game = game
        else:
            factory = load_entry_point(game, "OpponentEnv game") if isinstance(game, str) else game
            self.game = factory(**game_kwargs)
            if not isinstance(self.game, MultiAgentEnv):
                raise TypeError(f"OpponentEnv needs a MultiAgentEnv, got {type(self.game).__name__}")
        agents = self.game.possible_agents
        if seat is not None and seat != "random" and seat not in agents:
            raise ValueError(f"seat {seat!r} is not an agent of {type(self.game).__name__} (agents: {agents})")
        self.seat_choice = seat
        self.seat = agents[0] if seat in (None, "random") else seat
        chosen = opponent if opponent is not None else self.game.default_opponent
        table = chosen if isinstance(chosen, dict) else {agent: chosen for agent in agents}
        self.opponents = {agent: self._resolve(table.get(agent, self.game.default_opponent), opponent_base_url)
                          for agent in agents}
        self.over = True

    def _resolve(self, opponent: Any, base_url: str | None) -> str | Callable[[str], str]:
        if callable(opponent):
            return opponent
        if isinstance(opponent, str) and opponent.startswith("model:"):
            return _model_opponent(opponent.removeprefix("model:"), base_url)
        if opponent not in self.game.scripted_players:
            raise ValueError(f"unknown opponent {opponent!r} for {type(self.game).__name__}: use one of "
                             f"{', '.join(self.game.scripted_players)}, 'model:SPEC' or a callable")
        return opponent

    # the game owns the randomness: seeding the game seeds the episode
    @property
    def rng(self) -> Any:
        return self.game.rng

    @property
    def np_random(self) -> Any:
        return self.game.np_random

    def _opponent_action(self, agent: str) -> str:
        opponent = self.opponents[agent]
        if isinstance(opponent, str):
            return self.game.scripted_action(agent, opponent)
        return str(opponent(self.game.observe(agent)))

    def _play_others(self, moves: list[dict[str, str]]) -> tuple[float, bool, bool, dict[str, Any]]:
        """Let the opponents move until the seat must act or the game ends; returns the seat's
        reward, termination, truncation and last info from those moves."""
        reward, terminated, truncated, info = 0.0, False, False, {}
        while not self.game.done and self.seat not in self.game.active_agents:
            actions = {agent: self._opponent_action(agent) for agent in self.game.active_agents}
            _obs, rewards, terms, truncs, infos = self.game.step(actions)
            moves.append(actions)
            reward += float(rewards.get(self.seat, 0.0))
            terminated |= bool(terms.get(self.seat, False))
            truncated |= bool(truncs.get(self.seat, False))
            info = infos.get(self.seat, info) or info
            if self.seat not in self.game.agents:
                break
        return reward, terminated, truncated, info

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        _obs, infos = self.game.reset(seed=seed, **kwargs)
        if self.seat_choice == "random":
            self.seat = self.game.rng.choice(self.game.possible_agents)
        moves: list[dict[str, str]] = []
        self._play_others(moves)
        self.over = self.seat not in self.game.agents
        info = {**infos.get(self.seat, {}), "seat": self.seat, "opponent_actions": moves}
        return self.game.observe(self.seat), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.over:
            return OVER, 0.0, True, False, {"seat": self.seat}
        actions = {self.seat: action}
        # simultaneous moves: the opponents choose from the same position, before seeing the seat's action
        for agent in self.game.active_agents:
            if agent != self.seat:
                actions[agent] = self._opponent_action(agent)
        _obs, rewards, terms, truncs, infos = self.game.step(actions)
        reward = float(rewards.get(self.seat, 0.0))
        terminated, truncated = bool(terms.get(self.seat, False)), bool(truncs.get(self.seat, False))
        info = dict(infos.get(self.seat, {}))
        moves = [{a: m for a, m in actions.items() if a != self.seat}] if len(actions) > 1 else []
        if self.seat in self.game.agents:
            more, term2, trunc2, info2 = self._play_others(moves)
            reward += more
            terminated, truncated = terminated or term2, truncated or trunc2
            info.update(info2)
        if self.seat not in self.game.agents or self.game.done:
            self.over = True
            terminated = terminated or not truncated
        # observe() shows the position and the seat's latest feedback, after the opponents' replies
        info.update(seat=self.seat, opponent_actions=[m for m in moves if m])
        return self.game.observe(self.seat), reward, terminated, truncated, info

    def sample_random_action(self) -> str:
        return self.game.sample_random_action(self.seat)

    def get_state(self) -> dict[str, Any]:
        return {"game": self.game.get_state(), "seat": self.seat, "over": self.over}

    def set_state(self, state: dict[str, Any]) -> None:
        self.game.set_state(state["game"])
        self.seat, self.over = state["seat"], state["over"]

    def spawn(self, same_state: bool = False, **overrides: Any) -> Env:
        args, kwargs = self._init_args
        # a fresh game, not the one this env plays on
        if isinstance(kwargs.get("game"), MultiAgentEnv):
            kwargs = {**kwargs, "game": kwargs["game"].spawn()}
        elif args and isinstance(args[0], MultiAgentEnv):
            args = (args[0].spawn(), *args[1:])
        env = type(self)(*args, **{**kwargs, **overrides})
        env.env_id, env.spec = self.env_id, self.spec
        if same_state:
            env.set_state(self.get_state())
        return env

    def close(self) -> None:
        self.game.close()

    def __repr__(self) -> str:
        return f"<OpponentEnv {self.env_id or type(self.game).__name__} seat={self.seat}>"
