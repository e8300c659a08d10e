"""The whole task set: the modules that register tasks (:mod:`gem_envs_terminal.tasks`' ``task``), imported here
rather than from ``tasks`` (which each of them imports)."""

from __future__ import annotations

from gem_envs_terminal import task_debug, task_files, task_text  # noqa: F401  (they register their tasks)
from gem_envs_terminal.tasks import TASKS, TaskSpec


def load_all() -> dict[str, TaskSpec]:
    """Every task, by name."""
    return TASKS
