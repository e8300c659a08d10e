"""The agent's workspace: a snapshot of files that lives on the trusted side between commands.

Every command runs in a fresh sandbox (gem-tools' public ``Sandbox.run_python``): a small
launcher unpacks the snapshot into ``ws/`` (the command's working directory), runs the
command with ``sh -c`` and its output sent to a file, then packs ``ws/`` up again and
prints the new snapshot after a per-run marker. The trusted side parses it with bounded,
non-executing code (regular files, directories and symlinks as plain entries; sizes
capped) and keeps it as the workspace. So the workspace survives between steps, is the
env's ``get_state``, and the task's check reads it here, where the agent cannot reach.

Forging the printed snapshot gains the agent nothing: it can write those files anyway.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any

from gem_tools.sandbox import MiB, Sandbox, SandboxResult, Status

#: the most the workspace may hold (bytes of file contents, entries); beyond it a command's changes are dropped
MAX_BYTES = 1 * MiB
MAX_ENTRIES = 400
#: what of a command's output the agent sees
MAX_OUTPUT = 8 * 1024
#: the modification time every unpacked entry shows (2024-01-01 00:00 UTC): the snapshot keeps no times
EPOCH = 1_704_067_200

# runs inside the sandbox: unpack, run, pack. Argument: the command's wall-clock limit in seconds
_LAUNCHER = r'''
import base64, json, os, subprocess, sys
state = json.load(open("state.json"))
os.makedirs("ws", exist_ok=True)
for entry in state["entries"]:
    path = os.path.join("ws", entry["path"])
    os.makedirs(os.path.dirname(path) or "ws", exist_ok=True)
    if entry["kind"] == "dir":
        os.makedirs(path, exist_ok=True)
    elif entry["kind"] == "link":
        os.symlink(entry["target"], path)
    else:
        with open(path, "wb") as f:
            f.write(base64.b64decode(entry["data"]))
        os.chmod(path, 0o755 if entry.get("exec") else 0o644)
# the snapshot keeps no times: every entry shows one fixed time, so `ls -l` of the workspace repeats between runs
for entry in state["entries"]:
    os.utime(os.path.join("ws", entry["path"]), (EPOCH, EPOCH), follow_symlinks=False)
os.utime("ws", (EPOCH, EPOCH))
with open("out.txt", "wb") as out:
    try:
        code = subprocess.run(["sh", "-c", state["command"]], cwd="ws", stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, timeout=float(sys.argv[1]), start_new_session=True).returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
entries, total = [], 0
for root, dirs, files in os.walk("ws"):
    dirs.sort()
    for name in sorted(dirs) + sorted(files):
        path = os.path.join(root, name)
        rel = os.path.relpath(path, "ws")
        if len(entries) >= MAX_ENTRIES:
            print(MARKER + json.dumps({"error": "too many files"}))
            sys.exit(0)
        if os.path.islink(path):
            entries.append({"path": rel, "kind": "link", "target": os.readlink(path)})
        elif os.path.isdir(path):
            entries.append({"path": rel, "kind": "dir"})
        elif os.path.isfile(path):
            size = os.path.getsize(path)
            total += size
            if total > MAX_BYTES:
                print(MARKER + json.dumps({"error": "the workspace is over its size limit"}))
                sys.exit(0)
            data = base64.b64encode(open(path, "rb").read()).decode()
            entries.append({"path": rel, "kind": "file", "data": data, "exec": os.access(path, os.X_OK)})
with open("out.txt", "rb") as f:
    output = f.read(MAX_OUTPUT + 1)
print(MARKER + json.dumps({"entries": entries, "code": code,
                           "output": base64.b64encode(output).decode()}))
'''


@dataclass
class Workspace:
    """Files, directories and symlinks by relative path (POSIX separators).

    >>> ws = Workspace.from_files({"a/b.txt": "hi\\n"})
    >>> ws.text("a/b.txt"), ws.is_dir("a"), ws.exists("c")
    ('hi\\n', True, False)
    """

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)

    @classmethod
    def from_files(cls, files: dict[str, str | bytes], executable: tuple[str, ...] = ()) -> Workspace:
        ws = cls()
        for path, data in files.items():
            ws.files[path] = data.encode() if isinstance(data, str) else bytes(data)
            parts = path.split("/")[:-1]
            ws.dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        ws.executable = set(executable)
        return ws

    # -- reading (what checks use) ----------------------------------------------------
    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs or path in self.links

    def is_file(self, path: str) -> bool:
        return path in self.files

    def is_dir(self, path: str) -> bool:
        return path in self.dirs

    def text(self, path: str) -> str | None:
        """A file's contents as text (invalid UTF-8 replaced), or None if it is no file."""
        data = self.files.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    def listing(self, under: str = "") -> list[str]:
        """Paths of the files directly or indirectly under ``under``."""
        prefix = f"{under.rstrip('/')}/" if under else ""
        return sorted(p for p in self.files if p.startswith(prefix))

    # -- serialising ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The snapshot as JSON (also what the launcher reads)."""
        entries: list[dict[str, Any]] = [{"path": d, "kind": "dir"} for d in sorted(self.dirs)]
        entries += [{"path": p, "kind": "file", "data": base64.b64encode(d).decode(), "exec": p in self.executable}
                    for p, d in sorted(self.files.items())]
        entries += [{"path": p, "kind": "link", "target": t} for p, t in sorted(self.links.items())]
        return {"entries": entries}

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> Workspace:
        """Parse a snapshot; raises ValueError on anything malformed (paths escaping the root included)."""
        ws, total = cls(), 0
        entries = state.get("entries")
        if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
            raise ValueError(f"a workspace snapshot needs a list of at most {MAX_ENTRIES} entries")
        for entry in entries:
            path = entry.get("path") if isinstance(entry, dict) else None
            if not isinstance(path, str) or not _safe(path):
                raise ValueError(f"bad path in workspace snapshot: {path!r:.80}")
            kind = entry.get("kind")
            if kind == "dir":
                ws.dirs.add(path)
            elif kind == "link" and isinstance(entry.get("target"), str):
                ws.links[path] = entry["target"][:4096]
            elif kind == "file" and isinstance(entry.get("data"), str):
                data = base64.b64decode(entry["data"], validate=True)
                total += len(data)
                if total > MAX_BYTES:
                    raise ValueError("workspace snapshot over its size limit")
                ws.files[path] = data
                if entry.get("exec"):
                    ws.executable.add(path)
            else:
                raise ValueError(f"bad entry in workspace snapshot: {str(entry)[:80]}")
        return ws


def _safe(path: str) -> bool:
    return bool(path) and not path.startswith("/") and ".." not in path.split("/") and "\x00" not in path


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its output (capped), exit code ("timeout" when killed), and the new workspace
    (None when the run could not be saved: the workspace stays as it was)."""

    output: str
    exit_code: int | str | None
    workspace: Workspace | None
    note: str = ""


def run_command(sandbox: Sandbox, workspace: Workspace, command: str, timeout: float) -> CommandResult:
    """Run ``command`` in a fresh sandbox on a copy of ``workspace``."""
    marker = "\n@@gem-workspace-" + base64.b32encode(os.urandom(10)).decode() + "@@"
    launcher = f"MAX_ENTRIES = {MAX_ENTRIES}\nMAX_BYTES = {MAX_BYTES}\nMAX_OUTPUT = {MAX_OUTPUT}\nEPOCH = {EPOCH}\n" \
               f"MARKER = {marker!r}\n" + _LAUNCHER
    state = json.dumps({**workspace.to_json(), "command": command})
    # the launcher's own work (unpack, pack) gets a few seconds beyond the command's limit
    limits = sandbox.limits.with_(timeout=timeout + 5, output=4 * MAX_BYTES, output_kill=8 * MAX_BYTES)
    result: SandboxResult = sandbox.run_python(launcher, files={"state.json": state}, limits=limits,
                                               args=[str(timeout)])
    _, found, tail = result.stdout.rpartition(marker)
    if not found:
        why = {Status.TIMEOUT: "the run timed out", Status.LIMIT: f"the run hit its {result.limit} limit"}.get(
            result.status, f"the run failed ({result.status.value})")
        return CommandResult("", None, None, f"{why}; the workspace is unchanged.")
    try:
        report = json.loads(tail)
        if "error" in report:
            return CommandResult("", None, None, f"{report['error']}; the workspace is unchanged.")
        workspace_after = Workspace.from_json(report)
        output = base64.b64decode(report["output"]).decode("utf-8", errors="replace")
    except (ValueError, KeyError, TypeError) as exc:
        return CommandResult("", None, None, f"the workspace could not be read back ({exc}); it is unchanged.")
    note = ""
    if len(output) > MAX_OUTPUT:
        output, note = output[:MAX_OUTPUT], f"(output cut at {MAX_OUTPUT} characters)"
    return CommandResult(output, report.get("code"), workspace_after, note)
