"""The iterated prisoner's dilemma: simultaneous moves, a few rounds, payoffs per round.

Both agents answer ``\\boxed{cooperate}`` or ``\\boxed{defect}`` at the same time (the
parallel mode of the multi-agent API); each sees the history. Per round: both cooperate
3 each, both defect 1 each, a defector against a cooperator 5 and the cooperator 0; rewards
are those points / (5 x rounds), so an episode pays at most 1. Scripted players:
``tit_for_tat`` (cooperate, then copy the other's last move), ``always_defect``, ``random``.
"""

from __future__ import annotations

from typing import Any

from gem_envs_multi.base import TextGame

PAYOFF = {("C", "C"): (3, 3), ("C", "D"): (0, 5), ("D", "C"): (5, 0), ("D", "D"): (1, 1)}
WORDS = {"cooperate": "C", "c": "C", "defect": "D", "d": "D"}


class PrisonersDilemma(TextGame):
    agent_names = ("player_0", "player_1")
    mode = "parallel"
    scripted_players = ("random", "tit_for_tat", "always_defect")
    default_opponent = "tit_for_tat"
    format_hint = "no \\boxed{cooperate} or \\boxed{defect}"

    def __init__(self, rounds: int = 5) -> None:
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        super().__init__(max_steps=rounds)
        self.rounds = rounds
        self.history: list[dict[str, str]] = []

    def new_episode(self) -> None:
        self.history = []

    def rules(self, agent: str) -> str:
        return (f"Iterated prisoner's dilemma, {self.rounds} rounds; both players move at once. Answer "
                "\\boxed{cooperate} or \\boxed{defect}. Each round: both cooperate 3 points each, both defect 1 "
                "each, a defector against a cooperator 5 and the cooperator 0.")

    def view(self, agent: str) -> str:
        other = next(a for a in self.possible_agents if a != agent)
        mine = sum(PAYOFF[(r[agent], r[other])][0] for r in self.history)
        rows = [f"round {i + 1}: you {r[agent]}, other {r[other]}" for i, r in enumerate(self.history)]
        return "\n".join([*rows, f"Round {len(self.history) + 1} of {self.rounds}. Your points: {mine}."]) \
            if not self.over else "\n".join([*rows, f"Your points: {mine}."])

    def parse_move(self, agent: str, boxed: str) -> Any | None:
        return WORDS.get(boxed.strip().lower())

    def play(self, moves: dict[str, Any]) -> dict[str, float] | None:
        a, b = self.possible_agents
        self.history.append(dict(moves))
        pa, pb = PAYOFF[(moves[a], moves[b])]
        scale = 5 * self.rounds
        self.tell(a, f"Round {len(self.history)}: you {moves[a]}, other {moves[b]}: you got {pa}.")
        self.tell(b, f"Round {len(self.history)}: you {moves[b]}, other {moves[a]}: you got {pb}.")
        if len(self.history) >= self.rounds:
            self.finish("The game is over.")
        return {a: pa / scale, b: pb / scale}

    def scripted_action(self, agent: str, player: str) -> str:
        other = next(a for a in self.possible_agents if a != agent)
        if player == "tit_for_tat":
            return "\\boxed{" + ("defect" if self.history and self.history[-1][other] == "D" else "cooperate") + "}"
        if player == "always_defect":
            return "\\boxed{defect}"
        return super().scripted_action(agent, player)

    def sample_random_action(self, agent: str | None = None) -> str:
        return "\\boxed{" + self.rng.choice(["cooperate", "defect"]) + "}"

    def game_state(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.history = [dict(r) for r in state["history"]]
