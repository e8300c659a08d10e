"""A cooperative signalling game: a speaker names a target, a listener picks it out.

Four objects, each a size, colour and shape (``small red circle``), no two alike. The
``speaker`` sees which one is the target and sends a message of at most three words in
``\\boxed{}``; the ``listener`` sees the objects in its own shuffled order (so a position
says nothing) and the message, and answers with an object number in ``\\boxed{}``. Both
get 1 when the listener picks the target, else 0.

Scripted players: the ``heuristic`` speaker names the fewest attributes that single the
target out; the ``heuristic`` listener picks among the objects that have every attribute
word of the message. Together they always succeed.
"""

from __future__ import annotations

import itertools
from typing import Any

from gem_envs_multi.base import TextGame

SIZES = ("small", "large")
COLOURS = ("red", "blue", "green", "yellow")
SHAPES = ("circle", "square", "triangle", "star")
ATTRIBUTES = (SIZES, COLOURS, SHAPES)
MAX_WORDS = 3
NUM_OBJECTS = 4


class Signalling(TextGame):
    agent_names = ("speaker", "listener")
    scripted_players = ("random", "heuristic")
    default_opponent = "heuristic"
    format_hint = "no message (speaker) or object number (listener) in \\boxed{}"

    def __init__(self, max_steps: int = 2) -> None:
        super().__init__(max_steps)
        self.objects: list[list[str]] = []
        self.target = 0
        self.order: list[int] = []
        self.message: str | None = None

    def new_episode(self) -> None:
        every = [list(o) for o in itertools.product(*ATTRIBUTES)]
        self.objects = self.rng.sample(every, NUM_OBJECTS)
        self.target = self.rng.randrange(NUM_OBJECTS)
        self.order = self.rng.sample(range(NUM_OBJECTS), NUM_OBJECTS)
        self.message = None

    def rules(self, agent: str) -> str:
        if agent == "speaker":
            return ("Signalling game (you are the speaker). The listener sees the same four objects in another order "
                    f"and must pick the target from your message. Send at most {MAX_WORDS} words in \\boxed{{}}, "
                    "e.g. \\boxed{red star}. You both score 1 if the listener picks the target.")
        return ("Signalling game (you are the listener). The speaker knows which object is the target and sent you "
                "a message. Answer with the object's number in \\boxed{}, e.g. \\boxed{2}. You both score 1 if you "
                "pick the target.")

    def view(self, agent: str) -> str:
        if agent == "speaker":
            lines = [f"{'->' if i == self.target else '  '} {' '.join(o)}" for i, o in enumerate(self.objects)]
            return "Objects (-> marks the target):\n" + "\n".join(lines)
        lines = [f"{n + 1}. {' '.join(self.objects[i])}" for n, i in enumerate(self.order)]
        heard = "The speaker has not spoken yet." if self.message is None else f"Message: {self.message!r}"
        return "Objects:\n" + "\n".join(lines) + "\n" + heard

    def parse_move(self, agent: str, boxed: str) -> Any | None:
        if agent == "speaker":
            words = boxed.split()
            return " ".join(words) if 1 <= len(words) <= MAX_WORDS and len(boxed) <= 60 else None
        text = boxed.strip()
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 2 else None

    def play(self, moves: dict[str, Any]) -> dict[str, float] | None:
        (agent, move), = moves.items()
        if agent == "speaker":
            self.message = move
            self.tell("speaker", f"You said {move!r}.")
            return None
        picked = self.order[move - 1] if 1 <= move <= NUM_OBJECTS else None
        target = " ".join(self.objects[self.target])
        if picked == self.target:
            self.finish(f"The game is over: the listener picked the target, the {target}. You both score 1.")
            return {a: 1.0 for a in self.possible_agents}
        self.finish(f"The game is over: the listener picked object {move}, but the target was the {target}.")
        return {a: 0.0 for a in self.possible_agents}

    def scripted_action(self, agent: str, player: str) -> str:
        if player != "heuristic":
            return super().scripted_action(agent, player)
        if agent == "speaker":
            target = self.objects[self.target]
            for size in range(1, 4):
                for slots in itertools.combinations(range(3), size):
                    words = [target[s] for s in slots]
                    if sum(all(o[s] == w for s, w in zip(slots, words)) for o in self.objects) == 1:
                        return "\\boxed{" + " ".join(words) + "}"
        words = set((self.message or "").lower().split())
        matches = [n + 1 for n, i in enumerate(self.order) if words <= set(self.objects[i])]
        return f"\\boxed{{{self.rng.choice(matches or list(range(1, NUM_OBJECTS + 1)))}}}"

    def sample_random_action(self, agent: str | None = None) -> str:
        agent = agent or (self.active_agents or ["speaker"])[0]
        if agent == "speaker":
            return "\\boxed{" + " ".join(self.rng.choice(a) for a in self.rng.sample(ATTRIBUTES, 2)) + "}"
        return f"\\boxed{{{self.rng.randint(1, NUM_OBJECTS)}}}"

    def game_state(self) -> dict[str, Any]:
        return {"objects": self.objects, "target": self.target, "order": self.order, "message": self.message}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.objects, self.target = [list(o) for o in state["objects"]], state["target"]
        self.order, self.message = list(state["order"]), state["message"]
