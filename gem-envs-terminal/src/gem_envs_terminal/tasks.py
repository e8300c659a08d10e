"""The task set: each task draws its files from a seed, says what to do, and checks the result.

A task is a function ``build(rng) -> Task`` registered with :func:`task` under a name and
a category (``files``, ``text``, ``debug``). The :class:`Task` it returns holds the
instruction, the starting files, the check (a function of the final :class:`Workspace`
run on the trusted side; debugging checks may also run the agent's program on hidden
inputs in a fresh sandbox through ``probe``), and a solver: shell commands that solve it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from gem_envs_terminal.workspace import Workspace

#: probe(workspace, command) -> the command's output, run in a fresh sandbox on a copy of the workspace
Probe = Callable[[Workspace, str], str]
Check = Callable[[Workspace, Probe], float]

CATEGORIES = ("files", "text", "debug")
WORDS = ("apple", "river", "stone", "cloud", "maple", "tiger", "ocean", "pixel", "amber", "cedar", "delta", "ember",
         "falcon", "garnet", "harbor", "iris", "jasper", "kernel", "lumen", "meadow", "nectar", "orbit", "prism",
         "quartz", "raven", "sierra", "tundra", "umber", "violet", "willow")


@dataclass(frozen=True)
class Task:
    """One drawn task."""

    instruction: str
    files: dict[str, str] = field(default_factory=dict)
    check: Check = lambda ws, probe: 0.0
    solution: tuple[str, ...] = ()
    executable: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskSpec:
    name: str
    category: str
    build: Callable[[random.Random], Task]


TASKS: dict[str, TaskSpec] = {}


def task(name: str, category: str) -> Callable[[Callable[[random.Random], Task]], Callable[[random.Random], Task]]:
    """Register ``build`` as task ``name`` of ``category``."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown task category {category!r}")

    def register(build: Callable[[random.Random], Task]) -> Callable[[random.Random], Task]:
        if name in TASKS:
            raise ValueError(f"task {name!r} is registered twice")
        TASKS[name] = TaskSpec(name, category, build)
        return build

    return register


def text_is(ws: Workspace, path: str, expected: str) -> float:
    """1.0 when ``path`` holds ``expected`` (trailing whitespace of the file ignored), else 0.0."""
    got = ws.text(path)
    return float(got is not None and got.rstrip() == expected.rstrip())


def all_of(*conditions: bool) -> float:
    return float(all(conditions))


def words(rng: random.Random, n: int) -> list[str]:
    return rng.sample(WORDS, n)
