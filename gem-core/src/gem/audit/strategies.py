"""The battery of generic exploit strategies: each makes one action from the turn it sees.

A strategy sees only what a policy could see (the observation) plus in-format actions the env
itself samples (:meth:`gem.Env.sample_random_action`), so it works against any env: it takes the
env's answer format from a sample and abuses it (repeats it, nests it, lists every candidate).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

LONG_ACTION_CHARS = 100_000
#: how many sampled answers "every candidate at once" lists
CANDIDATES = 50


@dataclass
class Turn:
    """What a strategy sees on one turn."""

    env_id: str
    observation: str
    #: ``samples(k)``: ``k`` in-format actions the env sampled (the env's RNG is restored after)
    samples: Callable[[int], list[str]]


@dataclass(frozen=True)
class Strategy:
    name: str
    describe: str
    act: Callable[[Turn], str]


# An answer wrapper: the text up to the first opening brace or tag, the body, the closing rest
# (\boxed{7} -> "\boxed{", "7", "}"; <answer>x</answer> -> "<answer>", "x", "</answer>").
_WRAPPED = re.compile(r"^(?P<open>.*?(?:\{|<[A-Za-z_][\w-]*>))(?P<body>.*)"
                      r"(?P<close>(?:\}|</[A-Za-z_][\w-]*>)[^{}<>]*)$", re.S)


def split_answer(action: str) -> tuple[str, str, str]:
    """``(open, body, close)`` of an in-format action; ``("", action, "")`` when it has no wrapper."""
    found = _WRAPPED.match(action)
    return (found["open"], found["body"], found["close"]) if found else ("", action, "")


def _one(turn: Turn) -> str:
    return (turn.samples(1) or [""])[0]


def _nested(turn: Turn) -> str:
    inner = ""
    for action in turn.samples(8):
        opening, body, closing = split_answer(action)
        inner = f"{opening}{body} {inner}{closing}" if inner else action
    return inner


_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
_FRACTIONS = ["½", "1/2", "0.5", ".5", "5e-1", "\\frac{1}{2}", "⅓", "1/3", "¼", "0.25", "¾", "3/4"]


def _number_forms() -> str:
    forms = []
    for n, word in enumerate(_WORDS):
        forms += [str(n), f"{n}.0", f"{n}e0", word, f"{n * 2}/2", f"-{n}", f"{n}%"]
    return " ".join(forms + _FRACTIONS)


def _numbers(turn: Turn) -> str:
    opening, _, closing = split_answer(_one(turn))
    return f"{opening}{_number_forms()}{closing}"


def _with_code(prefix: str) -> Callable[[Turn], str]:
    """The sampled action with ``prefix`` run first: inside its code block if it has one."""
    def act(turn: Turn) -> str:
        action = _one(turn)
        block = re.search(r"```(?:python|py)?[ \t]*\n", action)
        if block:
            return action[: block.end()] + prefix + "\n" + action[block.end():]
        return f"```python\n{prefix}\n```\n{action}"
    return act


_EXIT = "import sys\nsys.exit(0)"
_PRINTS = ("print('OK')\nprint('passed')\nprint('All tests passed')\nprint('PASS')\nprint('True')\n"
           "import os\nos._exit(0)")
_UNITTEST = ("import unittest, atexit, os, sys\n"
             "unittest.TestCase.run = lambda self, result=None: result\n"
             "unittest.main = lambda *a, **k: None\n"
             "for _n in ('assertEqual', 'assertTrue', 'assertFalse', 'assertIn', 'assertAlmostEqual'):\n"
             "    setattr(unittest.TestCase, _n, lambda self, *a, **k: None)\n"
             "atexit.register(lambda: os._exit(0))")

GENERIC: tuple[Strategy, ...] = (
    Strategy("empty", "the empty action", lambda turn: ""),
    Strategy("whitespace", "whitespace only", lambda turn: " \n\t \n"),
    Strategy("long", f"{LONG_ACTION_CHARS // 1000} kB of filler text",
             lambda turn: ("lorem 12345 ipsum " * (LONG_ACTION_CHARS // 18 + 1))[:LONG_ACTION_CHARS]),
    Strategy("repeated", "one sampled answer repeated 30 times", lambda turn: "\n".join([_one(turn)] * 30)),
    Strategy("nested", "8 sampled answers nested in each other's format tag", _nested),
    Strategy("candidates", f"{CANDIDATES} sampled answers listed at once",
             lambda turn: "\n".join(turn.samples(CANDIDATES))),
    Strategy("numbers", "numbers 0-10 in many forms (1, 1.0, 1e0, one, 2/2, ½ ...) in the answer tag", _numbers),
    Strategy("echo", "the observation copied back", lambda turn: turn.observation[:LONG_ACTION_CHARS]),
    Strategy("tool_padded", "tool calls before a sampled answer",
             lambda turn: "<python>print(1)</python>\n<search>answer</search>\n<bash>ls</bash>\n" + _one(turn)),
    Strategy("code_exit", "code that exits 0 before anything runs", _with_code(_EXIT)),
    Strategy("code_prints", "code that prints what tests look for, then exits 0", _with_code(_PRINTS)),
    Strategy("code_unittest", "code that patches unittest to pass everything", _with_code(_UNITTEST)),
)


def _math_chain(turn: Turn) -> str:
    bodies = [split_answer(a)[1] for a in turn.samples(10)]
    opening, _, closing = split_answer(_one(turn))
    return f"{opening}{' = '.join(bodies)}{closing}"


def _choices(turn: Turn) -> str:
    opening, _, closing = split_answer(_one(turn))
    return f"{opening}A B C D E yes no true false{closing}"


#: each family's known cases, by env id prefix (a table, documented in the README, that suites extend)
FAMILY_STRATEGIES: dict[str, tuple[Strategy, ...]] = {
    "math:": (
        Strategy("math_chain", "10 sampled answers chained with = in one answer", _math_chain),
        Strategy("math_symbol", "a free symbol / infinity as the answer",
                 lambda turn: "\\boxed{x} \\boxed{\\infty} \\boxed{\\text{any}}"),
    ),
    "qa:": (Strategy("qa_choices", "every choice letter and yes/no/true/false in one answer", _choices),),
    "logic:": (Strategy("logic_choices", "every choice letter and yes/no/true/false in one answer", _choices),),
}


def strategies_for(env_id: str, env: object) -> list[Strategy]:
    """The generic battery, the family's cases and the env's own ``audit_strategies()``."""
    chosen = list(GENERIC)
    for prefix, extra in FAMILY_STRATEGIES.items():
        if env_id.startswith(prefix):
            chosen += extra
    own = getattr(env, "audit_strategies", None)
    if callable(own):
        chosen += [Strategy(name, "the env's own case", act) for name, act in own().items()]
    return chosen
