"""Word Search: find the listed words hidden in a grid of letters.

>>> env = WordSearchEnv(hardcore=False, max_turns=20, num_words=5)
>>> obs, info = env.reset(seed=0)
>>> "Words to find" in info["suffix"]
True

Words run across or down (``hardcore``: also backwards) and each appears exactly once
in the grid, so a word's start and end cells identify it. A guess names the start and
end cells: ``\\boxed{start_row start_col end_row end_col}``; either order is accepted.

Rewards (GEM's): each word found earns ``1 / num_words`` (all found: 1.0 in total);
misses and invalid guesses (off the grid, not a straight line, repeated, a word
already found) earn 0; a reply without four numbers in ``\\boxed{}`` ends the episode
with -0.1.
"""

from __future__ import annotations

import re
import string
from typing import Any

from gem_envs_games import words
from gem_envs_games.base import Outcome, TurnGame, reference_alias
from gem_envs_games.board import render_grid

_GUESS = re.compile(r"^[\s\[(]*(\d{1,6})[\s,)(]+(\d{1,6})[\s,)(\]\[-]+(\d{1,6})[\s,)(]+(\d{1,6})[\s)\]]*$")
#: layouts tried before the grid grows by one row and column
_ATTEMPTS = 50


def parse_guess(text: str) -> tuple[int, int, int, int] | None:
    """``(start_row, start_col, end_row, end_col)`` from e.g. ``"1 1 1 5"`` or
    ``"(1, 1) (1, 5)"``.

    >>> parse_guess("1 1 1 5"), parse_guess("(1, 1) - (1, 5)"), parse_guess("1 1 1")
    ((1, 1, 1, 5), (1, 1, 1, 5), None)
    """
    match = _GUESS.match(text)
    if match is None:
        return None
    r1, c1, r2, c2 = (int(g) for g in match.groups())
    return r1, c1, r2, c2


def lines_of(grid: list[list[str]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Every row and column as ``(letters, cells)``, read left to right / top to bottom."""
    rows = [("".join(row), [(r, c) for c in range(len(row))]) for r, row in enumerate(grid)]
    cols = [("".join(row[c] for row in grid), [(r, c) for r in range(len(grid))]) for c in range(len(grid[0]))]
    return rows + cols


def occurrences(grid: list[list[str]], word: str, backwards: bool) -> set[tuple[tuple[int, int], tuple[int, int]]]:
    """The ``(first cell, last cell)`` spans where ``word`` can be read (sorted ends)."""
    found = set()
    for text, cells in lines_of(grid):
        for target in {word, word[::-1]} if backwards else {word}:
            start = text.find(target)
            while start != -1:
                ends = sorted((cells[start], cells[start + len(word) - 1]))
                found.add((ends[0], ends[1]))
                start = text.find(target, start + 1)
    return found


class WordSearchEnv(TurnGame):
    """Find ``num_words`` hidden words within ``max_turns`` guesses.

    Words come from :func:`gem_envs_games.words.word_search_words`: frequent 4-7 letter
    words, or (``hardcore``) rarer 5-9 letter words that may also run backwards. With
    any setting None (GEM's random preset) every episode draws ``hardcore`` and uses 5
    words and 20 turns.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    correct_words = reference_alias("found", set, list)
    game_board = reference_alias("grid")
    #: the guesses made, as the reference lists them: (start_row, start_col, end_row, end_col)
    attempts = reference_alias("tried", lambda tried: [(*a, *b) for a, b in tried],
                               lambda attempts: [sorted([[r1, c1], [r2, c2]]) for r1, c1, r2, c2 in attempts])
    #: the words the targets are drawn from (lower case; a copy)
    word_list = property(lambda self: list(words.word_search_words(self.hardcore)))

    @property
    def placed_words(self) -> dict[str, tuple[int, int, str]]:
        """``{WORD: (row, col, "across" | "down")}``, (row, col) the word's first cell, as the reference keeps
        them; a word written backwards (hardcore only, which the reference lacks) gives its top or left cell."""
        return {word: (*min(span[0], span[1]), "across" if span[0][0] == span[1][0] else "down")
                for word, span in zip(self.targets, self.spans)}

    @property
    def highlighted_positions(self) -> set[tuple[int, int]]:
        """The ``(row, col)`` cells of the words found so far (shown in brackets on the board)."""
        marked: set[tuple[int, int]] = set()
        for word, ((r1, c1), (r2, c2)) in zip(self.targets, self.spans):
            if word in self.found:
                dr, dc = (r2 > r1) - (r2 < r1), (c2 > c1) - (c2 < c1)
                marked.update((r1 + dr * i, c1 + dc * i) for i in range(len(word)))
        return marked

    format_error = "no guess like \\boxed{1 1 1 5} found."

    def __init__(self, hardcore: bool | None = False, max_turns: int | None = 20, num_words: int | None = 5) -> None:
        self._random = hardcore is None or max_turns is None or num_words is None
        if not self._random and not 1 <= num_words <= max_turns:
            raise ValueError(f"num_words must be 1..max_turns ({max_turns}), got {num_words}")
        self.hardcore, self.max_turns, self.num_words = (False, 20, 5) if self._random else (
            bool(hardcore), max_turns, num_words
        )
        self.grid: list[list[str]] = []
        self.targets: list[str] = []
        self.spans: list[list[list[int]]] = []  # per target: [[r1, c1], [r2, c2]]
        self.found: list[str] = []
        self.tried: list[list[list[int]]] = []  # guesses made, as sorted [[r1, c1], [r2, c2]]

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            self.hardcore = self.rng.random() < 0.5
        pool = words.word_search_words(self.hardcore)
        while True:
            drawn = self.rng.sample(pool, self.num_words)
            self.targets = sorted((w.upper() for w in drawn), key=lambda w: (-len(w), w))
            # a word inside another could be read twice; draw again
            if any(a in b or a[::-1] in b for a in self.targets for b in self.targets if a != b):
                continue
            base = round(1.5 * len(self.targets[0]))
            if any(self._generate(size) for size in range(base, base + 4)):
                break
        self.found = []
        self.tried = []
        direction = "across (left to right) or down (top to bottom)"
        if self.hardcore:
            direction = "across or down, forwards or backwards"
        return (
            "You are playing Word Search.\n"
            f"The {len(self.targets)} words listed below are hidden in the grid, each running {direction}. "
            "Rows and columns are numbered from 0.\n"
            "To mark a word, give the cells of its first and last letters: "
            "\\boxed{start_row start_col end_row end_col}, e.g. \\boxed{1 1 1 5} for a word in row 1 "
            f"from column 1 to column 5. You have {self.max_turns} guesses; a miss, a repeated guess or "
            "a line that is not straight wastes one. Found words are shown in [brackets]. "
            "Anything else in place of a guess ends the game."
        )

    def _generate(self, size: int) -> bool:
        """Place the targets in a ``size`` x ``size`` grid and fill the rest so that each
        target can be read exactly once; False if no such grid was found."""
        letters = string.ascii_uppercase
        for _ in range(_ATTEMPTS):
            grid = [[""] * size for _ in range(size)]
            spans = []
            for word in self.targets:
                text = word[::-1] if self.hardcore and self.rng.random() < 0.5 else word
                options = [
                    (r, c, dr, dc)
                    for dr, dc in ((0, 1), (1, 0))
                    for r in range(size - dr * (len(text) - 1))
                    for c in range(size - dc * (len(text) - 1))
                    if all(grid[r + dr * i][c + dc * i] in ("", ch) for i, ch in enumerate(text))
                ]
                if not options:
                    break
                r, c, dr, dc = self.rng.choice(options)
                for i, ch in enumerate(text):
                    grid[r + dr * i][c + dc * i] = ch
                spans.append([[r, c], [r + dr * (len(text) - 1), c + dc * (len(text) - 1)]])
            else:
                for row in grid:
                    for c, ch in enumerate(row):
                        if not ch:
                            row[c] = self.rng.choice(letters)
                if all(len(occurrences(grid, w, self.hardcore)) == 1 for w in self.targets):
                    self.grid, self.spans = grid, spans
                    return True
        return False

    def parse_move(self, boxed: str) -> tuple[int, int, int, int] | None:
        return parse_guess(boxed)

    def play(self, guess: tuple[int, int, int, int]) -> str | Outcome:
        r1, c1, r2, c2 = guess
        ends = sorted([[r1, c1], [r2, c2]])
        shown = f"({r1}, {c1}) to ({r2}, {c2})"
        if not all(0 <= v < len(self.grid) for v in guess):
            return f"{shown} leaves the grid; the turn is lost."
        word = self._word_at(ends)
        reward = 0.0
        if r1 != r2 and c1 != c2:
            feedback = f"{shown} is not a row or a column; the turn is lost."
        elif ends in self.tried:
            feedback = f"you already tried {shown}; the turn is lost."
        elif word is not None and word in self.found:
            feedback = f"{word} is already found; the turn is lost."
        elif word is not None:
            self.found.append(word)
            reward = 1 / len(self.targets)
            feedback = f"you found {word}!"
            if len(self.found) == len(self.targets):
                return Outcome.win(f"{feedback} Every word is found. You win!\n\n{self._render()}", reward)
        else:
            feedback = f"no listed word runs from {shown}."
        self.tried.append(ends)
        return Outcome(feedback, reward)

    def last_turn_note(self) -> str:
        missing = ", ".join(w for w in self.targets if w not in self.found)
        return f" That was your last turn; not found: {missing}."

    def _word_at(self, ends: list[list[int]]) -> str | None:
        for word, span in zip(self.targets, self.spans):
            if sorted(span) == ends:
                return word
        return None

    def _render(self) -> str:
        marked = self.highlighted_positions
        return render_grid(
            [[f"[{ch}]" if (r, c) in marked else ch for c, ch in enumerate(row)] for r, row in enumerate(self.grid)]
        )

    def task_suffix(self) -> str:
        listed = ", ".join(f"[{w}]" if w in self.found else w for w in self.targets)
        return (
            f"Grid:\n{self._render()}\nWords to find ({len(self.found)}/{len(self.targets)} found): {listed}\n"
            f"Turns left: {self.turns_left}. Enter your guess."
        )

    def sample_random_action(self) -> str:
        size = len(self.grid) or 1
        r, c = self.rng.randrange(size), self.rng.randrange(size)
        if self.rng.random() < 0.5:
            return f"\\boxed{{{r} {c} {r} {self.rng.randrange(size)}}}"
        return f"\\boxed{{{r} {c} {self.rng.randrange(size)} {c}}}"

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {
            "hardcore": self.hardcore,
            "num_words": self.num_words,
            "grid": [list(row) for row in self.grid],
            "targets": list(self.targets),
            "spans": [[list(end) for end in span] for span in self.spans],
            "found": list(self.found),
            "attempts": [[list(end) for end in ends] for ends in self.tried],
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.hardcore, self.num_words = state["hardcore"], state["num_words"]
        self.grid = [list(row) for row in state["grid"]]
        self.targets = list(state["targets"])
        self.spans = [[list(end) for end in span] for span in state["spans"]]
        self.found = list(state["found"])
        self.tried = [[list(end) for end in ends] for ends in state["attempts"]]


def register(registry: Any) -> None:
    """Register GEM's Word Search ids."""
    entry = "gem_envs_games.word_search:WordSearchEnv"
    registry.register("game:WordSearch-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:WordSearch-v0-easy", entry, num_words=5, max_turns=20, hardcore=False)
    registry.register("game:WordSearch-v0-hard", entry, num_words=5, max_turns=20, hardcore=True)
    registry.register("game:WordSearch-v0-random", entry, num_words=None, max_turns=None, hardcore=None)
