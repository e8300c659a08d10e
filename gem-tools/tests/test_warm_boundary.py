"""The zygote/run boundary of warm sandboxes (issue 33, findings 3-5), each attack as the red team ran it.

A run shares its zygote's uid, so it could lower the zygote's hard limits with prlimit (every later run's
setrlimit then failed: correct programs scored 0), renice it, re-pin it, or lower limits the plan does not
set; the kernel's keyrings outlived runs and pools; and a run that left 19,000 nested directories held the
next run of its pool for the whole reply timeout. Real bwrap and unshare sandboxes, real zygotes
(and real cold runs, whose fresh uids left a keyring record on the host each).
"""

from __future__ import annotations

import os
import secrets
import signal
import textwrap
import time
from collections.abc import Iterator

import pytest

from gem_tools.sandbox import Limits, Sandbox
from gem_tools.sandbox.seccomp import KEY_SYSCALLS

#: ioprio_get, ioprio_set (a run can set the I/O priority of any process of its uid, and forks inherit it)
IOPRIO = {"x86_64": (252, 251), "aarch64": (31, 30)}[os.uname().machine]
ADD_KEY, REQUEST_KEY, KEYCTL = KEY_SYSCALLS[os.uname().machine][1]


@pytest.fixture(params=("bwrap", "unshare"))
def warm(request) -> Iterator[Sandbox]:
    box = Sandbox(backend=request.param, limits=Limits(timeout=10, memory=512 << 20),
                  env={"GEM_TEST_POOL": secrets.token_hex(6)})  # fmt: skip
    assert box.path()[0] == "warm", box.path()
    yield box
    box._pool().close()


def run(box: Sandbox, code: str) -> str:
    result = box.run_python(textwrap.dedent(code))
    assert result.ok, (result.status, result.stderr)
    return result.stdout.strip()


STATE = f"""
    import ctypes, os, resource
    print(resource.getrlimit(resource.RLIMIT_FSIZE), resource.getrlimit(resource.RLIMIT_DATA),
          resource.getrlimit(resource.RLIMIT_STACK), os.getpriority(os.PRIO_PROCESS, 0),
          os.sched_getscheduler(0), sorted(os.sched_getaffinity(0)), ctypes.CDLL(None).syscall({IOPRIO[0]}, 1, 0))
"""

#: what one run did to its zygote (its parent) in the red team's round, one change at a time
ATTACKS = {
    "fsize": "resource.prlimit(parent, resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))",
    "data": "resource.prlimit(parent, resource.RLIMIT_DATA, (256 << 20, 256 << 20))",
    "stack": "resource.prlimit(parent, resource.RLIMIT_STACK, (1 << 20, 1 << 20))",
    "nice": "os.setpriority(os.PRIO_PROCESS, parent, 19)",
    "nice_of_the_uid": "os.setpriority(os.PRIO_USER, os.getuid(), 19)",
    "affinity": "os.sched_setaffinity(parent, {min(os.sched_getaffinity(0))})",
    "policy": "os.sched_setscheduler(parent, os.SCHED_IDLE, os.sched_param(0))",
    "ioprio": f"assert ctypes.CDLL(None).syscall({IOPRIO[1]}, 1, parent, 3 << 13) == 0  # IOPRIO_CLASS_IDLE",
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_run_cannot_change_what_later_runs_inherit_from_the_zygote(warm, attack):
    """Finding 3: a run lowered its zygote's hard RLIMIT_FSIZE with prlimit (every later run's setrlimit to the
    plan's 16 MiB then failed: correct programs scored 0), reniced it, re-pinned it, lowered RLIMIT_DATA and
    RLIMIT_STACK (limits the plan does not set); its scheduling policy and I/O priority (SCHED_IDLE, the idle
    I/O class) are the same kind of attack. Each change alone, as each alone was inherited."""
    before = run(warm, STATE)
    run(warm, f"""
        import ctypes, os, resource
        parent = os.getppid()
        {ATTACKS[attack]}
    """)  # fmt: skip
    for _ in range(2):  # every later run starts as the first did, and a correct program still writes its file
        assert run(warm, STATE) == before
        assert run(warm, "open('/tmp/out', 'wb').write(b'x' * (4 << 20)); print('ok')") == "ok"


def _key_users() -> set[str]:
    with open("/proc/key-users") as f:
        return {line.split(":")[0].strip() for line in f}


def test_no_keyring_is_left_on_the_host_and_a_run_stores_no_key(warm):
    """Finding 4: the zygote's KEYCTL_CLEAR made the kernel keep per-uid keyrings for good (10 of 10 zygote uids
    held keys after their pools closed), and a run's key in the uid's persistent keyring reached the next run."""
    before = _key_users()
    for _ in range(4):
        assert run(warm, KEY_CALLS) == "[-1, -1, -1] True"
    warm._pool().close()
    time.sleep(0.2)  # the kernel drops a uid's record once its last process is gone
    assert _key_users() <= before


KEY_CALLS = f"""
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    calls = [libc.syscall({ADD_KEY}, b"user", b"secret", b"x", 1, -4),  # add_key to the user keyring
             libc.syscall({REQUEST_KEY}, b"user", b"secret", None, -4),  # request_key
             libc.syscall({KEYCTL}, 22, -1, -4)]  # keyctl(GET_PERSISTENT)
    print(calls, ctypes.get_errno() == errno.EPERM)
"""


@pytest.mark.parametrize("backend", ("bwrap", "unshare"))
def test_a_cold_run_leaves_no_keyring_on_the_host(backend):
    """Finding 4, cold: each cold run has a fresh uid, and one add_key left that uid's record (and its user
    keyrings) in /proc/key-users for good; a policy could grow kernel memory a run at a time. The backend's
    seccomp filter refuses the keyring syscalls in every sandboxed process."""
    box = Sandbox(backend=backend, warm=False, limits=Limits(timeout=10))
    before = _key_users()
    for _ in range(2):
        assert run(box, KEY_CALLS) == "[-1, -1, -1] True"
    assert _key_users() <= before


@pytest.mark.parametrize("backend", ("bwrap", "unshare"))
@pytest.mark.parametrize("warm_run", (False, None))
def test_another_abi_cannot_reach_the_keyring_syscalls(backend, warm_run):
    """The filter matches syscall numbers of this machine's ABI: i386 (``int 0x80``) and x32 calls would reach
    keyctl under other numbers, so they kill the process."""
    if os.uname().machine != "x86_64":
        pytest.skip("x86_64 only")
    box = Sandbox(backend=backend, warm=warm_run, limits=Limits(timeout=10))
    result = box.run_python("import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39); print('alive')")  # x32 getpid
    assert result.stdout == "" and result.exit_code == -signal.SIGSYS, (result.status, result.exit_code)


def test_a_dirty_zygote_does_not_hold_the_next_run(warm, monkeypatch):
    """Finding 5: a 0.3 s run that left 19,000 nested directories made the next run of its pool wait 5.1 s for
    that zygote's wipe. The wipe is bounded by depth and time (the zygote gives up and a fresh one serves), and
    acquire waits for a dirty zygote at most as long as a fresh start took."""
    from gem_tools.sandbox import warm as warm_module

    waits: list[tuple[float, float]] = []  # (how long acquire waited for a dirty zygote, a fresh start's time then)
    real = warm_module._cleaned_up

    async def recorded(zygote, timeout, destroy_after):
        waits.append((timeout, warm._pool().spawn_seconds))
        return await real(zygote, timeout, destroy_after)

    monkeypatch.setattr(warm_module, "_cleaned_up", recorded)
    run(warm, "pass")
    dirty = warm._pool().idle[0].popen.pid
    run(warm, """
        import os
        os.chdir('/tmp')
        for _ in range(19000):
            os.mkdir('d')
            os.chdir('d')
    """)  # fmt: skip
    assert run(warm, "import os; print(os.listdir('/tmp'))") == "['main.py']"
    # what acquire waited is asserted, not the wall clock (tests assert no times): never the reply timeout (5 s)
    assert waits and all(waited <= fresh for waited, fresh in waits)
    # the zygote that took the deep tree gave up its wipe (too deep) and exited: it serves no run again
    assert all(z.popen.pid != dirty or z.popen.poll() is not None for z in warm._pool().idle)
