"""The terminal env: shell commands in a sandboxed workspace, rewarded by the task's check at the end.

Actions follow the reference package's terminal env: ``<bash>COMMAND</bash>`` runs a
command (the content may also be YAML ``cmd: ...`` with ``timeout_secs: N``, as the
reference writes it) and shows ``<bash_output>...</bash_output>``; ``<finish></finish>``
ends the episode. When the episode ends (finish, or the turn limit: truncation) the
task's check scores the final workspace, 0 to 1, on the trusted side. An action with
neither tag is a format error: -0.1, ``info["format_error"]`` True, and the episode ends,
unchecked.

Every command runs in a fresh gem-tools sandbox (bubblewrap: no network, read-only
system, an unprivileged uid, per-run limits) on a copy of the workspace; the state is the
workspace's contents (:mod:`gem_envs_terminal.workspace`).

>>> env = gem.make("terminal:Shell-v0", task="create_file")   # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                             # doctest: +SKIP
>>> env.step("<bash>ls</bash>")                               # doctest: +SKIP
"""

from __future__ import annotations

import random
import re
from typing import Any

import yaml

import gem
from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem_envs_terminal.task_set import load_all
from gem_envs_terminal.tasks import CATEGORIES, Task, TaskSpec
from gem_envs_terminal.workspace import CommandResult, Workspace, run_command

NO_EPISODE = "No episode is running: call reset() to start one."
#: the reference's tag grammar; a bounded, non-backtracking scan (tags are matched literally)
_TAG = re.compile(r"<(bash|finish)>")
MAX_TIMEOUT = 30.0
#: longer commands are refused (a shell would fail on them with "argument list too long" anyway)
MAX_COMMAND = 64 * 1024
MAX_YAML = 4096
MAX_YAML_BRACKETS = 64

#: what ``sample_random_action`` runs: commands whose output depends only on the workspace (``ls -l`` would
#: show the run's uid, random per run under root, and the times of ``..``), so random play repeats for a seed
RANDOM_COMMANDS = ("ls -a", "pwd", "cat *.txt | head -n 5", "find . -type f | head", "echo hi > scratch.txt",
                   "wc -l * 2>/dev/null | tail -n 1", "rm -f scratch.txt", "mkdir -p tmpdir")


def parse_action(action: str) -> tuple[str, str, float | None] | None:
    """``("bash", command, timeout)`` / ``("finish", "", None)`` from the first complete tag, or None."""
    unclosed: set[str] = set()
    for match in _TAG.finditer(action):
        name = match.group(1)
        if name in unclosed:
            continue
        end = action.find(f"</{name}>", match.end())
        if end < 0:
            # no closing tag after this one, so none after any later one either: one search per tag name
            unclosed.add(name)
            if len(unclosed) == 2:
                return None
            continue
        content = action[match.end():end]
        if name == "finish":
            return "finish", "", None
        return ("bash", *_command(content))
    return None


def _command(content: str) -> tuple[str, float | None]:
    text = content.strip()
    # YAML only for the reference's short `cmd: ...` form: PyYAML's parser is recursive and its scanner slows
    # down quadratically on nested flow collections (4000 "[" take seconds), so long or bracket-heavy text
    # is taken as the command itself
    if text.startswith("cmd:") and len(text) <= MAX_YAML and text.count("[") + text.count("{") <= MAX_YAML_BRACKETS:
        try:
            data = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("cmd"), str):
            timeout = data.get("timeout_secs")
            return data["cmd"], float(timeout) if isinstance(timeout, (int, float)) else None
    return text, None


class TerminalEnv(gem.Env):
    """Shell tasks in a sandboxed workspace.

    ``task`` fixes one task by name; otherwise each reset draws one of ``categories``
    (default: all). ``timeout`` is each command's wall-clock limit (a command may ask for
    less, or more up to 30 s); ``backend`` the gem-tools sandbox backend.
    """

    def __init__(self, task: str | None = None, categories: tuple[str, ...] | list[str] | None = None,
                 max_turns: int = 20, timeout: float = 10.0, backend: str = "auto") -> None:
        from gem_tools.sandbox import Limits, Sandbox

        tasks = load_all()
        if task is not None and task not in tasks:
            raise ValueError(f"unknown terminal task {task!r}; tasks: {', '.join(sorted(tasks))}")
        chosen = tuple(categories) if categories else CATEGORIES
        unknown = [c for c in chosen if c not in CATEGORIES]
        if unknown:
            raise ValueError(f"unknown task categories {unknown}; choose from {', '.join(CATEGORIES)}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.pool: list[TaskSpec] = [tasks[task]] if task else sorted(
            (t for t in tasks.values() if t.category in chosen), key=lambda t: t.name)
        self.max_turns, self.timeout = max_turns, float(timeout)
        self.sandbox = Sandbox(backend=backend, limits=Limits(timeout=self.timeout))
        self.task_spec: TaskSpec | None = None
        self.task_seed = 0
        self.task: Task | None = None
        self.workspace = Workspace()
        self.turn = 0
        self.done = True

    # -- the task ---------------------------------------------------------------------
    def _draw(self, name: str, task_seed: int) -> None:
        self.task_spec = next(t for t in self.pool if t.name == name)
        self.task_seed = task_seed
        self.task = self.task_spec.build(random.Random(task_seed))

    def instruction(self) -> str:
        assert self.task is not None
        return (f"You are in a Linux shell, in your workspace directory. Task: {self.task.instruction}\n\n"
                "Run a command with <bash>COMMAND</bash>; you will see its output. There is no network. When the "
                f"task is done, answer <finish></finish>: the workspace is then checked. You have {self.max_turns} "
                "turns.")

    def _probe(self, ws: Workspace, command: str) -> str:
        return run_command(self.sandbox, ws, command, self.timeout).output

    def score(self) -> float:
        """The task's check on the current workspace (0 to 1)."""
        assert self.task is not None
        try:
            return max(0.0, min(1.0, float(self.task.check(self.workspace, self._probe))))
        except Exception:  # a check must not fail on what the agent left behind; if it does, no credit
            return 0.0

    # -- the episode ------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        spec = self.rng.choice(self.pool)
        self._draw(spec.name, self.rng.getrandbits(32))
        assert self.task is not None
        self.workspace = Workspace.from_files(self.task.files, self.task.executable)
        self.turn, self.done = 0, False
        return self.instruction(), {"task": spec.name, "category": spec.category}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done or self.task is None:
            return NO_EPISODE, 0.0, True, False, {}
        self.turn += 1
        parsed = parse_action(action) if isinstance(action, str) else None
        if parsed is None:
            self.done = True
            return ("Format error: no <bash>COMMAND</bash> or <finish></finish> found. The episode is over.",
                    FORMAT_ERROR_REWARD, True, False, {FORMAT_ERROR: True})
        kind, command, timeout = parsed
        info: dict[str, Any] = {FORMAT_ERROR: False}
        if kind == "finish":
            return self._end("Finished.", terminated=True, info=info)
        if len(command) > MAX_COMMAND:
            text = f"The command is longer than {MAX_COMMAND} characters and was not run."
            if self.turn >= self.max_turns:
                return self._end(text + "\nThat was the last turn.", terminated=False, info=info)
            return text, 0.0, False, False, info
        # commands with NULs or lone surrogates cannot be passed to a shell: make them plain text
        command = command.replace("\x00", "").encode("utf-8", errors="replace").decode("utf-8")
        limit = min(timeout if timeout and timeout > 0 else self.timeout, MAX_TIMEOUT)
        result: CommandResult = run_command(self.sandbox, self.workspace, command, limit)
        if result.workspace is not None:
            self.workspace = result.workspace
        code = "timed out" if result.exit_code == "timeout" else f"exit code {result.exit_code}"
        text = f"<bash_output>{result.output}</bash_output>\n({code})" + (f" {result.note}" if result.note else "")
        info["exit_code"] = result.exit_code
        if self.turn >= self.max_turns:
            return self._end(text + "\nThat was the last turn.", terminated=False, info=info)
        return text, 0.0, False, False, info

    def _end(self, text: str, terminated: bool, info: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.done = True
        reward = self.score()
        info.update(correct=reward >= 1.0, score=reward)
        return f"{text} The workspace was checked: score {reward:.2f}.", reward, terminated, not terminated, info

    def sample_random_action(self) -> str:
        if self.rng.random() < 0.1:
            return "<finish></finish>"
        return f"<bash>{self.rng.choice(RANDOM_COMMANDS)}</bash>"

    def solution(self) -> list[str]:
        """The current task's solver as actions: its commands, then finish."""
        assert self.task is not None
        return [f"<bash>{c}</bash>" for c in self.task.solution] + ["<finish></finish>"]

    def audit_answers(self) -> tuple[str | None, None]:
        """``gem audit``'s right and wrong in-format actions (:mod:`gem.audit`): the solver's action for this
        turn (its commands in order, then finish), so the audit can tell a severe finding; no wrong action,
        so that the baseline stays random play, whose lucky commands the strategies' random commands share."""
        if self.task is None:
            return None, None
        actions = self.solution()
        return actions[min(self.turn, len(actions) - 1)], None

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {"task": self.task_spec.name if self.task_spec else None, "task_seed": self.task_seed, "turn": self.turn,
                "done": self.done, "workspace": self.workspace.to_json(), "rng": self.rng_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        if state["task"] is not None:
            self._draw(state["task"], state["task_seed"])
        self.turn, self.done = state["turn"], state["done"]
        self.workspace = Workspace.from_json(state["workspace"])
        self.set_rng_state(state["rng"])
