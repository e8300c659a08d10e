"""A coding problem and its tests, as plain JSON-friendly data.

Two test styles:

- :class:`IOTest`: the program reads ``stdin`` and must print ``expected`` (compared
  after trimming, see :func:`normalize_output`). The expected output never enters the
  sandbox: the parent compares.
- :class:`AssertTest`: Python code (asserts, or a ``check(candidate)`` call) run after
  the program in the same interpreter, HumanEval/MBPP style.

>>> p = Problem("demo/1", "Print the sum of two numbers.", (IOTest("1 2\\n", "3"),))
>>> p.kind
'stdio'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class IOTest:
    """Run the program with ``stdin``; it passes when its trimmed output equals ``expected``'s."""

    stdin: str
    expected: str


@dataclass(frozen=True)
class AssertTest:
    """Test code run after the program; it passes when it raises nothing."""

    code: str


@dataclass(frozen=True)
class Problem:
    """One task: the prompt the agent sees and the tests its program must pass.

    ``setup`` (function tests only) runs before the program in its namespace: the
    HumanEval prompt (imports and helpers the tests call), MBPP's ``test_setup_code``.
    ``entry_point`` names the function under test; the tests call it through a guard
    that only lets plain data (numbers, strings, lists, dicts, ...) come back.
    """

    id: str
    prompt: str
    tests: tuple[IOTest, ...] | tuple[AssertTest, ...]
    setup: str = ""
    entry_point: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not self.tests:
            raise ValueError(f"problem {self.id!r} has no tests")
        kinds = {type(t) for t in self.tests}
        if len(kinds) != 1:
            raise ValueError(f"problem {self.id!r} mixes stdin/stdout and assert tests")

    @property
    def kind(self) -> str:
        """``"stdio"`` or ``"function"``."""
        return "stdio" if isinstance(self.tests[0], IOTest) else "function"


def normalize_output(text: str) -> str:
    """Output as compared: line endings unified, trailing spaces and blank lines dropped.

    >>> normalize_output("3 \\r\\n4\\n\\n") == normalize_output("3\\n4")
    True
    """
    return "\n".join(line.rstrip() for line in text.strip().splitlines())
