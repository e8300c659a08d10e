"""A coding problem and its tests, as plain JSON-friendly data.

Two test styles:

- :class:`IOTest`: the program reads ``stdin`` and must print ``expected`` (compared
  after trimming, see :func:`normalize_output`). The expected output never enters the
  sandbox: the parent compares.
- :class:`AssertTest`: Python code (asserts, or a ``check(candidate)`` call),
  HumanEval/MBPP style. It runs in a trusted judge process, not beside the program:
  its calls to the program's functions go to the program's process and come back as
  plain values (see :mod:`gem_envs_code.harness`).

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
    """Test code; it passes when it raises nothing. It sees the problem's ``setup``
    (trusted helpers) and, of the program, the names it uses that the setup does not
    define, as stand-ins that call the program in its own process."""

    code: str


@dataclass(frozen=True)
class Problem:
    """One task: the prompt the agent sees and the tests its program must pass.

    ``setup`` (function tests only) runs before the program in its namespace, and
    before the test in the judge's: the HumanEval prompt (imports and helpers such as
    ``poly`` that the tests call; the judge uses its own copy, not the program's).
    ``test_setup`` runs in the program's process after the program: MBPP's
    ``test_setup_code``, which builds test inputs from the program's own classes.
    ``entry_point`` names the function under test; only plain data (numbers, strings,
    lists, dicts, ...) comes back from it.
    """

    id: str
    prompt: str
    tests: tuple[IOTest, ...] | tuple[AssertTest, ...]
    setup: str = ""
    entry_point: str | None = None
    test_setup: str = ""
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
