"""WikiGame: reach a target article from a start article by following links, within a turn limit.

The reference package's ids and presets (``game:WikiGame-v0-easy``: 30 turns,
``-hard``: 15), its variants (``noregrets`` default, ``oneback``, ``freenav``,
``eidetic``) and its summary settings (``page_summary_length=(100, "characters")``),
read offline by default: ``backend="zim"`` reads a ZIM file (``zim_path=``, e.g. a kiwix
Wikipedia dump) and without one a tiny linked corpus built on first use
(:func:`gem_envs_games.wikigame_zim.tiny_zim`). The live MediaWiki API is the opt-in
``backend="mw"`` (:mod:`gem_envs_games.wikigame_mw`); it is never a default.

A move is the id of a linked page in ``\\boxed{}`` (spaces may stand for underscores);
``\\boxed{<PREV_PAGE>}`` goes back in the variants that allow it. Rewards follow our
games, not the reference's shaping (see the README): reaching the target 1, a move or an
invalid move 0, a dead end (no-regrets, eidetic) ends the game with 0, a reply with no
``\\boxed{}`` is a format error (-0.1, the game ends).

>>> env = WikiGameEnv(max_turns=30)
>>> obs, info = env.reset(seed=0)
>>> "target page" in obs
True
"""

from __future__ import annotations

import os
import re
from collections import deque
from typing import Any

from gem_envs_games.base import Outcome, TurnGame, at_least, reference_alias
from gem_envs_games.wikigame_zim import WikiPage, ZimWiki, tiny_zim

PREV = "<PREV_PAGE>"
VARIANTS = ("noregrets", "oneback", "freenav", "eidetic")
UNITS = ("characters", "words", "sentences")
BACKENDS = ("zim", "mw")


class WikiGameEnv(TurnGame):
    """Navigate articles by links; see the module docstring."""

    format_error = "no page title found in \\boxed{}."

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias): the pages
    # are read from the backend by the ids we keep, never a second copy
    trawler = reference_alias("wiki")
    page_summary_length = reference_alias("summary_length")
    page_summary_length_unit = reference_alias("summary_unit")
    start_page = property(lambda self: self._page_or_none(self.start))
    target_page = property(lambda self: self._page_or_none(self.target))
    current_page = property(lambda self: self._page_or_none(self.current))
    #: the pages a move back returns through, the start first
    page_history = property(lambda self: [self.page(page_id) for page_id in self.history])

    # the reference's positional order; zim_path (ours) is keyword-only after it
    def __init__(self, max_turns: int = 10, backend: str = "zim", trawler_kwargs: dict[str, Any] | None = None,
                 page_summary_length: tuple[int, str] | list = (100, "characters"), variant: str = "noregrets",
                 *, zim_path: str | os.PathLike[str] | None = None, **_: Any) -> None:
        at_least("max_turns", max_turns, 1)
        self.max_turns = max_turns
        if variant not in VARIANTS:
            raise ValueError(f"Invalid variant {variant!r}; valid options are {list(VARIANTS)}")
        self.variant = variant
        length, unit = page_summary_length
        if unit not in UNITS:
            raise ValueError(f"Invalid page_summary_length unit {unit!r}; valid options are {list(UNITS)}")
        self.summary_length, self.summary_unit = int(length), unit
        if backend == "zim":
            self.wiki: Any = ZimWiki(zim_path if zim_path is not None else tiny_zim())
        elif backend == "mw":
            from gem_envs_games.wikigame_mw import MediaWikiSource

            self.wiki = MediaWikiSource(**(trawler_kwargs or {}))
        elif backend == "kiwix":
            raise ValueError("backend='kiwix' needs no server here: pass backend='zim' and zim_path= the ZIM file "
                             "kiwix-serve would serve")
        else:
            raise ValueError(f"Invalid backend {backend!r}; valid options are {list(BACKENDS)}")
        self.start = self.target = self.current = ""
        self.history: list[str] = []
        self.backtracked = False
        self.memory: list[str] = []
        # (start, target) for the next episode instead of a draw: _reset_fixed_page's
        self._fixed: tuple[WikiPage, WikiPage] | None = None

    def _reset_fixed_page(self, start_page_title: str, target_page_title: str,
                          seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """The reference's hook (its own WikiGame tests use it): a new episode from one page to another, given
        by title or id (spaces may stand for underscores)."""
        self._fixed = (self._page_titled(start_page_title), self._page_titled(target_page_title))
        try:
            return self.reset(seed)
        finally:
            self._fixed = None

    def _page_titled(self, title: str) -> WikiPage:
        for page_id in dict.fromkeys((title, title.replace(" ", "_"))):
            page = self.wiki.get_page(page_id)
            if page is not None:
                return page
        raise ValueError(f"WikiGame: no page {title!r} in the backend")

    def _page_or_none(self, page_id: str) -> WikiPage | None:
        return self.page(page_id) if page_id else None  # none before the first reset

    # -- pages ------------------------------------------------------------------------
    def page(self, page_id: str) -> WikiPage:
        page = self.wiki.get_page(page_id)
        if page is None:
            raise RuntimeError(f"WikiGame: page {page_id!r} vanished from the backend")
        return page

    def summary(self, page: WikiPage) -> str:
        text, n = page.content, self.summary_length
        if self.summary_unit == "characters":
            return text[:n]
        if self.summary_unit == "words":
            return " ".join(text.split()[:n])
        return " ".join(re.split(r"(?<=[.!?])\s+", text, maxsplit=n)[:n])

    def valid_pages(self, page: WikiPage) -> list[str]:
        if self.variant == "eidetic":
            return list(dict.fromkeys([*self.memory, *page.links]))
        return list(page.links)

    def _visit(self, page: WikiPage) -> None:
        self.current = page.page_id
        if self.variant == "eidetic":
            self.memory = list(dict.fromkeys([*self.memory, *page.links]))

    def _draw_pages(self) -> tuple[WikiPage, WikiPage]:
        for _ in range(50):
            start, target = self.wiki.random_page(self.rng), self.wiki.random_page(self.rng)
            if start is not None and target is not None and start.page_id != target.page_id:
                return start, target
        raise RuntimeError("WikiGame: the backend gave no two distinct pages with links")

    # -- TurnGame hooks ---------------------------------------------------------------
    def new_episode(self) -> str:
        start, target = self._fixed if self._fixed is not None else self._draw_pages()
        self.start, self.target, self.history, self.backtracked, self.memory = (
            start.page_id, target.page_id, [start.page_id], False, [])
        self._visit(start)
        back = {"noregrets": "You may NOT go back to the previous page (you may revisit pages by their links).",
                "eidetic": "You may move to any page linked from any page you have seen so far, but not go back.",
                "oneback": f"You may answer \\boxed{{{PREV}}} to return to the previous page, but not twice in a "
                           "row; it costs a turn.",
                "freenav": f"You may answer \\boxed{{{PREV}}} to return to the previous page; it costs a turn."}
        return (f"You are playing the Wikipedia Game: reach the target page within {self.max_turns} turns by "
                "following links. Each turn, move to a neighbouring page (one the current page links to) by "
                f"answering its exact title in \\boxed{{}}, e.g. \\boxed{{{(start.links or [target.page_id])[0]}}}. "
                f"{back[self.variant]}\nYou start at '{start.title}'; the target page is '{target.title}'. "
                f"Summary of the target page: {self.summary(target)}...")

    def task_suffix(self) -> str:
        # the reference's get_task_suffix: where you are, the page's summary, the prompt
        page = self.page(self.current)
        links = "\n".join(f"- \\boxed{{{link}}}" for link in self.valid_pages(page))
        return (f"You are on '{page.title}' (target: '{self.page(self.target).title}'). {self.turns_left_text()}\n"
                f"Summary: {self.summary(page)}...\nNeighbouring pages:\n{links}\n"
                "Enter the title of the neighbouring page you want to navigate to, in \\boxed{}.")

    def parse_move(self, boxed: str) -> str | None:
        move = boxed.strip()
        return move if move and len(move) <= 1000 else None

    def play(self, move: str) -> Outcome:
        if move == PREV:
            return self._back()
        here = self.page(self.current)
        valid = self.valid_pages(here)
        if move not in valid and move.replace(" ", "_") in valid:
            move = move.replace(" ", "_")
        if move not in valid:
            lowered = move.lower()
            close = next((link for link in valid if lowered and lowered in link.lower()), None)
            hint = f" Did you mean '{close}'?" if close else ""
            return Outcome(f"'{move[:200]}' is not a neighbouring page of '{here.title}'.{hint} Answer one of the "
                           "titles exactly.")
        nxt = self.wiki.get_page(move)
        if nxt is None:
            return Outcome(f"'{move}' could not be opened.")
        if nxt.page_id == self.target:
            self._visit(nxt)
            self.history.append(nxt.page_id)
            return Outcome.win(f"you reached the target page '{nxt.title}' in {self.turn} turns. You win.")
        if not self.valid_pages(nxt) and self.variant in ("noregrets", "eidetic"):
            self._visit(nxt)
            return Outcome.loss(f"'{nxt.title}' is a dead end with no links. The game is over.")
        if not nxt.links:
            # oneback / freenav: back where we were, at the cost of a turn
            self.turn += 1
            self.backtracked = True
            return Outcome(f"'{nxt.title}' is a dead end: you were sent back to '{here.title}', which cost an "
                           "extra turn.")
        self._visit(nxt)
        self.history.append(nxt.page_id)
        self.backtracked = False
        return Outcome(f"you moved to '{nxt.title}'.")

    def _back(self) -> Outcome:
        if self.variant in ("noregrets", "eidetic"):
            return Outcome("going back is not allowed in this variant.")
        if len(self.history) < 2:
            return Outcome("there is no previous page to go back to.")
        if self.variant == "oneback" and self.backtracked:
            return Outcome("you may not go back twice in a row.")
        self.history.pop()
        self._visit(self.page(self.history[-1]))
        self.backtracked = True
        return Outcome(f"you went back to '{self.page(self.current).title}'.")

    def last_turn_note(self) -> str:
        return f" That was your last turn: the target page '{self.page(self.target).title}' was not reached."

    def sample_random_action(self) -> str:
        links = self.valid_pages(self.page(self.current)) if self.current else []
        if not links:
            return f"\\boxed{{{PREV}}}"
        # the numpy stream: sampling leaves the episode's own draws unchanged
        return f"\\boxed{{{links[int(self.np_random.integers(len(links)))]}}}"

    def game_state(self) -> dict[str, Any]:
        return {"start": self.start, "target": self.target, "current": self.current, "history": list(self.history),
                "backtracked": self.backtracked, "memory": list(self.memory)}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.start, self.target, self.current = state["start"], state["target"], state["current"]
        self.history, self.backtracked = list(state["history"]), state["backtracked"]
        self.memory = list(state["memory"])


def shortest_path(env: WikiGameEnv, limit: int = 10_000) -> list[str] | None:
    """The fewest moves from the current page to the target (breadth-first over links; for small ZIMs)."""
    start, goal = env.current, env.target
    parents: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue and len(parents) < limit:
        here = queue.popleft()
        if here == goal:
            path = []
            while parents[here] is not None:
                path.append(here)
                here = parents[here]  # type: ignore[assignment]
            return path[::-1]
        page = env.wiki.get_page(here)
        for link in page.links if page else []:
            if link not in parents:
                parents[link] = here
                queue.append(link)
    return None


class WikiGameSolver:
    """Plays the shortest path (for the tiny corpus and other small ZIMs)."""

    def __init__(self, env: WikiGameEnv) -> None:
        self.env = env
        self.plan: list[str] = []

    def reset(self) -> None:
        self.plan = []

    def act(self, observation: str, info: Any = None) -> str:
        if not self.plan:
            self.plan = shortest_path(self.env.unwrapped) or []  # type: ignore[arg-type]
        return f"\\boxed{{{self.plan.pop(0) if self.plan else PREV}}}"


def register(registry: Any) -> None:
    """Register the reference's WikiGame ids (offline ZIM backend by default)."""
    entry = "gem_envs_games.wikigame:WikiGameEnv"
    registry.register("game:WikiGame-v0-easy", entry, max_turns=30)
    registry.register("game:WikiGame-v0-hard", entry, max_turns=15)
