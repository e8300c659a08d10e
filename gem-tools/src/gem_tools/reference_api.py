"""The reference package's sandbox helper, over our :class:`~gem_tools.sandbox.Sandbox`.

Reached as ``gem.utils.sandbox`` through gem-core's compatibility table.
"""

from __future__ import annotations

from gem_tools.sandbox import Sandbox, default_sandbox


def run_python(
    code: str, sandbox_type: str = "none", stdin: str | None = None, timeout: float = 10
) -> tuple[bool, str, str]:
    """Run ``code`` and return ``(success, stdout, stderr)`` as the reference's ``run_python``.

    ``sandbox_type="bwrap"`` asks for bubblewrap; ``"none"`` (the reference's unisolated
    mode) runs in the best sandbox available here all the same.
    """
    if sandbox_type not in ("none", "bwrap"):
        raise ValueError(f"sandbox_type must be 'bwrap' or 'none', got {sandbox_type!r}")
    sandbox = Sandbox(backend="bwrap") if sandbox_type == "bwrap" else default_sandbox()
    result = sandbox.run_python(code, stdin=stdin or "", limits=sandbox.limits.with_(timeout=timeout))
    return result.ok, result.stdout, result.stderr
