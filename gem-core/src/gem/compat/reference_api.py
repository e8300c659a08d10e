"""Reference-shaped helpers that have no exact counterpart among our own names.

Each is a thin layer over the function of ours that does the work (:mod:`gem.parsing`),
keeping the reference's return conventions so that code written against it reads the same
values.
"""

from __future__ import annotations

from gem.parsing import answer_tag, last_boxed, last_code_block


def extract_last_boxed_answer(solution: str) -> str | None:
    """Content of the last ``\\boxed{…}`` as written (not stripped), or ``None``.

    >>> extract_last_boxed_answer(r"so \\boxed{ 42 }")
    ' 42 '
    """
    return last_boxed(solution, strip=False)


def extract_last_tagged_answer(model_response: str) -> str | None:
    """Content of the last ``<answer>…</answer>``, stripped, or ``None``."""
    return answer_tag(model_response)


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
    format_error_reward: float = -0.1
