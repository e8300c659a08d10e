"""A warm zygote lives as long as the process, not as long as the thread that first asked for a run.

bwrap's ``--die-with-parent`` is the kernel's parent-death signal, which fires when the *thread* that started the
sandbox exits. Zygotes were started from whichever thread asked for a run: one asked for from a thread pool's
worker (a test's ``ThreadPoolExecutor``, ``run_sync``'s helper thread, a vector env's threads) died when that thread
ended, and took the run it was serving with it. In gem-envs-code's tests a right answer then scored 0 ("killed by
signal 9"), about one run in four right after a thread pool had finished. Real sandboxes and zygotes.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Iterator

import pytest

from gem_tools.sandbox import Limits, Sandbox


@pytest.fixture(params=("bwrap", "unshare"))
def warm(request) -> Iterator[Sandbox]:
    box = Sandbox(backend=request.param, limits=Limits(timeout=20), env={"GEM_TEST_POOL": secrets.token_hex(6)})
    assert box.path()[0] == "warm", box.path()
    yield box
    box._pool().close()


def test_a_run_survives_the_end_of_the_thread_that_started_its_zygote(warm):
    started, finish = threading.Event(), threading.Event()

    def first() -> None:
        assert warm.run_python("print(1)").ok  # the pool's zygote is started for this thread's run
        started.set()
        finish.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(60)
    assert len(warm._pool().idle) == 1

    async def while_the_thread_ends():
        run = asyncio.create_task(warm.arun_python("import time\ntime.sleep(1.5)\nprint(2)"))
        await asyncio.sleep(0.5)  # the run is on that zygote now
        finish.set()
        await asyncio.to_thread(thread.join)
        return await run

    result = asyncio.run(while_the_thread_ends())
    assert result.ok and result.stdout.strip() == "2", (result.status, result.exit_code, result.stderr)
    alive = warm._pool().idle
    assert len(alive) == 1 and alive[0].popen.poll() is None  # the same zygote, kept for the next run


def test_where_no_zygote_can_be_started_any_more_the_run_goes_cold(monkeypatch):
    """At interpreter shutdown the spawner takes no more work: the run is started cold, as on a host where no
    zygote starts, and nothing set up for the zygote is left open."""
    from concurrent.futures import ThreadPoolExecutor

    from gem_tools.sandbox import warm

    box = Sandbox(backend="bwrap", limits=Limits(timeout=20), env={"GEM_TEST_POOL": secrets.token_hex(6)})
    shut = ThreadPoolExecutor(1)
    shut.shutdown()
    monkeypatch.setattr(warm, "_spawner", lambda: shut)
    box.path()  # the backend's probe, once
    fds = len(os.listdir("/proc/self/fd"))
    result = box.run_python("print(3)")
    assert result.ok and result.stdout.strip() == "3"
    assert len(os.listdir("/proc/self/fd")) == fds
    assert "cannot start a zygote" in (box._pool().broken or "")
