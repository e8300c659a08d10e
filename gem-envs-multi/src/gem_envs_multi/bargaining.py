"""Bargaining over items with hidden values (after Lewis et al., 2017, "Deal or No Deal?").

Two agents split a pool of books, hats and balls. Each values the item types privately
(whole points; the whole pool is worth 10 to each), and sees only its own values. They
take turns: ``\\boxed{propose B H L}`` asks for B books, H hats and L balls (the other
gets the rest), ``\\boxed{accept}`` takes the other's latest proposal. A deal pays each
agent its own value of what it gets, divided by 10; no deal within ``max_steps`` pays 0.

The scripted ``heuristic`` knows its own values only: it accepts an offer worth at least
its current target, which falls from 8 to 5 points over the game, and otherwise proposes
the split that reaches its target while leaving the other as many items as possible.
"""

from __future__ import annotations

import itertools
from typing import Any

from gem_envs_multi.base import TextGame

ITEMS = ("books", "hats", "balls")
TOTAL = 10


def _value(values: list[int], take: list[int]) -> int:
    return sum(v * n for v, n in zip(values, take))


class Bargaining(TextGame):
    agent_names = ("player_0", "player_1")
    scripted_players = ("random", "heuristic")
    default_opponent = "heuristic"
    format_hint = "no \\boxed{propose B H L} or \\boxed{accept}"

    def __init__(self, max_steps: int = 10) -> None:
        super().__init__(max_steps)
        self.counts = [1, 1, 1]
        self.values: dict[str, list[int]] = {}
        self.offers: list[tuple[str, list[int]]] = []

    def new_episode(self) -> None:
        while True:
            counts = [self.rng.randint(1, 4) for _ in ITEMS]
            if not 5 <= sum(counts) <= 7:
                continue
            splits = [v for v in itertools.product(range(TOTAL + 1), repeat=3) if _value(list(v), counts) == TOTAL]
            # each agent values at least two item types, so there is something to trade
            splits = [list(v) for v in splits if sum(1 for x in v if x) >= 2]
            if splits:
                break
        self.counts = counts
        self.values = {agent: list(self.rng.choice(splits)) for agent in self.possible_agents}
        self.offers = []

    def rules(self, agent: str) -> str:
        pool = ", ".join(f"{n} {item}" for n, item in zip(self.counts, ITEMS))
        mine = ", ".join(f"{item} {v}" for v, item in zip(self.values[agent], ITEMS))
        return (f"Bargaining. Split the pool ({pool}) with the other player. Your private values per item: {mine} "
                f"(the pool is worth {TOTAL} to you; the other player's values differ and are hidden). On your turn "
                "answer \\boxed{propose B H L} to ask for B books, H hats and L balls (the other gets the rest), or "
                "\\boxed{accept} to take the other's latest proposal. A deal pays you your value of what you get / "
                f"{TOTAL}; no deal within {self.max_steps} turns pays 0.")

    def view(self, agent: str) -> str:
        if not self.offers:
            return "No proposal yet."
        who, take = self.offers[-1]
        if who == agent:
            return f"Your latest proposal: you get {take}, the other gets {self._rest(take)} (books, hats, balls)."
        yours = self._rest(take)
        return (f"The other player's latest proposal: you get {yours} (books, hats, balls), worth "
                f"{_value(self.values[agent], yours)} to you.")

    def _rest(self, take: list[int]) -> list[int]:
        return [c - t for c, t in zip(self.counts, take)]

    def parse_move(self, agent: str, boxed: str) -> Any | None:
        words = boxed.lower().split()
        if words == ["accept"]:
            return "accept"
        if len(words) == 4 and words[0] == "propose" and all(w.isascii() and w.isdigit() and len(w) <= 2
                                                              for w in words[1:]):
            return [int(w) for w in words[1:]]
        return None

    def play(self, moves: dict[str, Any]) -> dict[str, float] | None:
        (agent, move), = moves.items()
        other = next(a for a in self.possible_agents if a != agent)
        if move == "accept":
            if not self.offers or self.offers[-1][0] != other:
                self.tell(agent, "There is no proposal of the other player to accept: you lost your turn.")
                self.tell(other, "The other player tried to accept, but there was no proposal of yours.")
                return None
            take = self.offers[-1][1]
            shares = {other: take, agent: self._rest(take)}
            rewards = {a: _value(self.values[a], shares[a]) / TOTAL for a in self.possible_agents}
            deal = "; ".join(f"{a} gets {shares[a]}, worth {rewards[a] * TOTAL:.0f} to them"
                             for a in self.possible_agents)
            self.finish(f"The game is over: deal. {deal}.")
            return rewards
        if any(t > c for t, c in zip(move, self.counts)):
            self.tell(agent, f"You cannot ask for {move}: the pool is {self.counts}. You lost your turn.")
            self.tell(other, "The other player's proposal was impossible and lost the turn.")
            return None
        self.offers.append((agent, move))
        self.tell(agent, f"You proposed to get {move}.")
        self.tell(other, f"The other player proposed to get {move}.")
        return None

    def _target(self) -> int:
        return max(5, 8 - self.steps // 2)

    def scripted_action(self, agent: str, player: str) -> str:
        if player != "heuristic":
            return super().scripted_action(agent, player)
        values, target = self.values[agent], self._target()
        if self.offers and self.offers[-1][0] != agent and _value(values, self._rest(self.offers[-1][1])) >= target:
            return "\\boxed{accept}"
        options = [list(t) for t in itertools.product(*(range(c + 1) for c in self.counts))]
        good = [t for t in options if _value(values, t) >= target] or [list(self.counts)]
        # the smallest claim that reaches the target leaves the other the most to accept
        fewest = min(sum(t) for t in good)
        best = [t for t in good if sum(t) == fewest]
        take = max(best, key=lambda t: (_value(values, t), self.rng.random()))
        return "\\boxed{propose " + " ".join(map(str, take)) + "}"

    def sample_random_action(self, agent: str | None = None) -> str:
        if self.offers and self.rng.random() < 0.3:
            return "\\boxed{accept}"
        return "\\boxed{propose " + " ".join(str(self.rng.randint(0, c)) for c in self.counts) + "}"

    def game_state(self) -> dict[str, Any]:
        return {"counts": self.counts, "values": self.values, "offers": [[a, t] for a, t in self.offers]}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.counts, self.values = list(state["counts"]), {a: list(v) for a, v in state["values"].items()}
        self.offers = [(a, list(t)) for a, t in state["offers"]]
