"""Resident runs: one warm run of a trusted script kept for many requests, across event loops."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from gem_tools.sandbox import Limits, ResidentRun, Sandbox, Status
from gem_tools.sandbox.warm import WarmUnavailable

ECHO = "import sys\nfor line in sys.stdin:\n    print('seen', line.strip(), file=sys.stderr)\n" \
       "    sys.stdout.write(line[::-1].strip() + '\\n'); sys.stdout.flush()"  # fmt: skip


@pytest.fixture
def box():
    box = Sandbox(limits=Limits(timeout=5, memory=512 << 20), env={"GEM_TEST_POOL": secrets.token_hex(6)})
    assert box.path()[0] == "warm", box.path()
    yield box
    box._pool().close()


async def _ask(run: ResidentRun, text: str) -> bytes:
    run.send(text.encode() + b"\n")
    return await run.readline()


def test_one_run_serves_requests_from_one_event_loop_and_the_next(box):
    run = asyncio.run(box.start_resident(ECHO))
    assert asyncio.run(_ask(run, "abc")) == b"cba\n"
    assert asyncio.run(_ask(run, "xyz")) == b"zyx\n"  # a sync caller runs a new loop per call
    assert run.alive() and run.stderr() == "seen abc\nseen xyz\n"
    assert run.clear_stderr() and run.stderr() == ""
    big = "a" * (300 << 10)  # more than a pipe holds: written as the run reads
    assert asyncio.run(_ask(run, big)) == big.encode() + b"\n"
    result = asyncio.run(run.kill())
    assert result.status is Status.KILLED and result.exit_code == -9 and not run.alive()
    # its zygote went back to the pool: the next run is forked from it
    assert len(box._pool().idle) == 1


def test_a_run_that_exits_reports_its_status_and_stderr(box):
    async def go():
        run = await box.start_resident("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)")
        assert await run.readline() == b""
        return await run.kill()

    result = asyncio.run(go())
    assert (result.status, result.exit_code, result.stderr) == (Status.ERROR, 3, "bye\n")


def test_a_resident_run_is_in_the_sandbox_with_the_limits_memory_but_no_time_limit(box, tmp_path):
    marker = tmp_path / "host-only"
    marker.write_text("x")
    probe = (f"import os, resource, sys\nsys.stdin.readline()\nprint(os.path.exists({str(marker)!r}), "
             "resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(resource.RLIMIT_CPU)[0] > 1e6, "
             "os.getcwd(), flush=True)")  # fmt: skip

    async def go():
        run = await box.start_resident(probe)
        line = await _ask(run, "go")
        await run.kill()
        return line.decode().split()

    assert asyncio.run(go()) == ["False", "512", "True", "/tmp"]


def test_a_cold_sandbox_has_no_resident_runs():
    with pytest.raises(WarmUnavailable, match="warm=False"):
        asyncio.run(Sandbox(warm=False).start_resident(ECHO))


def test_alive_works_with_fds_past_select_s_limit(box):
    # a trainer with many sandboxes open holds fds past 1024, where select.select() raises
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2100:
        pytest.skip("cannot open fd 2000 here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2100), hard))
    try:
        run = asyncio.run(box.start_resident(ECHO))
        high = os.dup2(run.pidfd, 2000)
        os.close(run.pidfd)
        run.pidfd = high
        assert run.alive()
        asyncio.run(run.kill())
        assert not run.alive()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
