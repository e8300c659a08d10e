"""Small debugging tasks: a program with one bug; the check runs it on inputs the agent never sees.

The check's probe runs the fixed program in a fresh sandbox on a copy of the final
workspace and compares the last line it prints with answers computed here, on the
trusted side: printing the right answers means computing them, i.e. a fixed program.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

from gem_envs_terminal.tasks import Probe, Task, task, words
from gem_envs_terminal.workspace import Workspace


def _calls(module: str, function: str, inputs: list[Any], expected: list[Any]) -> Callable[[Workspace, Probe], float]:
    """A check that calls ``module.function(*args)`` on each hidden input and compares the results."""
    script = (f"import json, {module}; print(json.dumps([{module}.{function}(*args) for args in "
              f"json.loads({json.dumps(json.dumps(inputs))})]))")

    def check(ws: Workspace, probe: Probe) -> float:
        lines = probe(ws, f"python3 -c {_quote(script)}").strip().splitlines()
        try:
            return float(bool(lines) and json.loads(lines[-1]) == expected)
        except ValueError:
            return 0.0

    return check


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@task("fix_off_by_one", "debug")
def fix_off_by_one(rng: random.Random) -> Task:
    inputs = [[n] for n in rng.sample(range(1, 200), 5)]
    code = "def total(n):\n    \"\"\"The sum 1 + 2 + ... + n.\"\"\"\n    return sum(range(n))\n"
    return Task("stats.py's total(n) should return 1 + 2 + ... + n but is off. Fix stats.py.", {"stats.py": code},
                _calls("stats", "total", inputs, [n * (n + 1) // 2 for (n,) in inputs]),
                ("sed -i 's/range(n)/range(1, n + 1)/' stats.py",))


@task("fix_syntax_error", "debug")
def fix_syntax_error(rng: random.Random) -> Task:
    names = [[w] for w in words(rng, 4)]
    code = "def greet(name)\n    return f\"Hello, {name}!\"\n"
    return Task("greet.py does not even import: fix it so that greet(name) returns 'Hello, NAME!'.",
                {"greet.py": code}, _calls("greet", "greet", names, [f"Hello, {n}!" for (n,) in names]),
                ("sed -i 's/def greet(name)$/def greet(name):/' greet.py",))


@task("fix_wrong_operator", "debug")
def fix_wrong_operator(rng: random.Random) -> Task:
    inputs = [[n] for n in rng.sample(range(-100, 100), 8)]
    code = "def is_even(n):\n    return n % 2 == 1\n"
    return Task("parity.py's is_even(n) gives the wrong answers. Fix it.", {"parity.py": code},
                _calls("parity", "is_even", inputs, [n % 2 == 0 for (n,) in inputs]),
                ("sed -i 's/== 1/== 0/' parity.py",))


@task("fix_import", "debug")
def fix_import(rng: random.Random) -> Task:
    inputs = [[rng.randint(1, 50), rng.randint(1, 50)] for _ in range(5)]
    code = "import maths\n\n\ndef hyp(a, b):\n    return round(maths.hypot(a, b), 6)\n"
    return Task("geometry.py fails with an import error; fix it so hyp(a, b) returns the hypotenuse rounded to 6 "
                "places.", {"geometry.py": code},
                _calls("geometry", "hyp", inputs, [round(math.hypot(a, b), 6) for a, b in inputs]),
                ("sed -i 's/maths/math/g' geometry.py",))


@task("fix_mutable_default", "debug")
def fix_mutable_default(rng: random.Random) -> Task:
    items = words(rng, 4)
    code = ("def tag(item, tags=[]):\n    \"\"\"A fresh list holding the tags given and then item.\"\"\"\n"
            "    tags.append(item)\n    return tags\n")
    expected = [[w] for w in items]
    return Task("cart.py's tag(item) should return [item] on every call without a tags argument, but calls leak "
                "into each other. Fix it.", {"cart.py": code},
                _calls("cart", "tag", [[w] for w in items], expected),
                ("sed -i 's/tags=\\[\\]/tags=None/' cart.py",
                 "sed -i 's/    tags.append(item)/    tags = list(tags or [])\\n    tags.append(item)/' cart.py"))


@task("fix_name_error", "debug")
def fix_name_error(rng: random.Random) -> Task:
    inputs = [[rng.sample(range(100), rng.randint(1, 6))] for _ in range(4)]
    code = "def average(values):\n    total = sum(values)\n    return totl / len(values)\n"
    return Task("mean.py's average(values) crashes. Fix it.", {"mean.py": code},
                _calls("mean", "average", inputs, [sum(v) / len(v) for (v,) in inputs]),
                ("sed -i 's/totl/total/' mean.py",))


@task("fix_shell_script", "debug")
def fix_shell_script(rng: random.Random) -> Task:
    script = "#!/bin/sh\n# print how many .txt files the directory $1 holds\nls \"$1\" | wc -l\n"
    hidden = {f"probe/{w}.txt": "" for w in words(rng, rng.randint(2, 6))} | {
        f"probe/{w}.md": "" for w in words(rng, 3)}
    expected = str(sum(p.endswith(".txt") for p in hidden))

    def check(ws: Workspace, probe: Probe) -> float:
        ws = Workspace(dict(ws.files), set(ws.dirs), dict(ws.links), set(ws.executable))
        ws.files.update({p: b"" for p in hidden})
        ws.dirs.add("probe")
        out = probe(ws, "sh count.sh probe").strip().splitlines()
        return float(bool(out) and out[-1].strip() == expected)

    return Task("count.sh DIR should print how many .txt files DIR holds, but it counts every file. Fix it.",
                {"count.sh": script}, check,
                ("sed -i 's/ls \"$1\" | wc -l/ls \"$1\" | grep -c \"\\\\.txt$\"/' count.sh",),
                executable=("count.sh",))
