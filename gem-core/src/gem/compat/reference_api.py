"""Reference-shaped helpers that have no exact counterpart among our own names.

They keep the reference's return conventions and its readings of odd inputs, so that code
written against it reads the same values; each is linear in its input. Our own parsers
(:mod:`gem.parsing`) read a few odd inputs differently, as their docstrings say.
"""

from __future__ import annotations

import re

from gem.conventions import FORMAT_ERROR_REWARD
from gem.parsing import last_code_block

_BRACES = re.compile(r"[{}]")
_OPEN, _CLOSE = "<answer>", "</answer>"


def extract_last_boxed_answer(solution: str) -> str | None:
    """Content of the last ``\\boxed{…}`` as written (not stripped), or ``None``. As in the
    reference, only the last ``\\boxed`` counts: if it has no brace right after it, or its
    braces never balance, the answer is ``None`` (no earlier box is read instead).

    >>> extract_last_boxed_answer(r"so \\boxed{ 42 }")
    ' 42 '
    >>> extract_last_boxed_answer(r"\\boxed{1} and then \\boxed") is None
    True
    """
    start = solution.rfind("\\boxed")
    if start < 0 or not solution.startswith("\\boxed{", start):
        return None
    depth = 0
    for brace in _BRACES.finditer(solution, start):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return solution[start + len("\\boxed{") : brace.start()]
    return None


def extract_last_tagged_answer(model_response: str) -> str | None:
    """Content of the last ``<answer>…</answer>``, stripped, or ``None``, reading tags as the
    reference's regex does: each answer runs from an opening tag to the first closing tag
    after it, and the next one starts after that.

    >>> extract_last_tagged_answer("<answer><answer>x</answer>")
    '<answer>x'
    """
    found, pos = None, 0
    while (start := model_response.find(_OPEN, pos)) >= 0:
        end = model_response.find(_CLOSE, start + len(_OPEN))
        if end < 0:
            break
        found, pos = (start + len(_OPEN), end), end + len(_CLOSE)
    return None if found is None else model_response[found[0] : found[1]].strip()


def extract_code_from_model(model_response: str) -> str | None:
    """Content of the last fenced code block, stripped, or ``None``; fences are read as the
    reference reads them (``strict=True``: a one-word tag, then a newline at once).

    >>> extract_code_from_model("```py3\\nprint(1)\\n```"), extract_code_from_model("```c++\\nx\\n```")
    ('print(1)', None)
    """
    return last_code_block(model_response, strict=True)


class LanguageGameReward:
    """The reward conventions every GEM game follows (GEM's names for them)."""

    #: the task is solved
    success_reward: float = 1.0
    #: a step that neither ends nor breaks the game (a hint, a legal move)
    internal_step_reward: float = 0.0
    #: the task is failed (a mine, running out of guesses)
    fail_reward: float = 0.0
    #: a well-formed but illegal move (a guess outside the range)
    invalid_action_reward: float = 0.0
    #: the action cannot be parsed; the episode ends
    format_error_reward: float = FORMAT_ERROR_REWARD
