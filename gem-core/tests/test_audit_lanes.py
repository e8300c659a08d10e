"""gem audit --jobs: lanes played concurrently on separate env instances, with the same figures as playing
them one after another."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import threading
import time

import pytest

import gem
from gem.audit import EnvAudit
from gem.audit.play import audit_env
from gem.core import StepResult
from gem.testing.envs import CountEnv

WAIT = 0.03


class WaitsOnSubprocess(CountEnv):
    """Every step waits on a real subprocess (as a sandboxed shell or a test runner does); knows its answer."""

    def step(self, action: str) -> StepResult:
        subprocess.run(["sleep", str(WAIT)], check=True)
        return super().step(action)

    def audit_answers(self) -> tuple[str, str]:
        return f"\\boxed{{{self.target}}}", f"\\boxed{{{self.target % self.high + 1}}}"


class WaitsOnOneWorker(WaitsOnSubprocess):
    """Every step grades in the one worker all instances share (as rg:* grade in a bounded process pool)."""

    worker = threading.Lock()

    def step(self, action: str) -> StepResult:
        with WaitsOnOneWorker.worker:
            return super().step(action)


def _figures(result: EnvAudit) -> list[tuple]:
    return [(result.baseline_mean, result.right_mean)] + [
        (s.name, s.mean, s.gain, s.bound, s.flagged, s.severe) for s in result.strategies]


def test_an_env_waiting_on_a_subprocess_plays_its_lanes_at_once_with_the_same_figures(gem_registry):
    """Pins the speed of multi-turn sandboxed envs (terminal:* took 8 min an id): with --jobs, lanes run in
    threads on their own env instances, and every lane still plays every seed to its end."""
    gem.register("wait:Sub-v0", WaitsOnSubprocess, max_turns=2)
    started = time.monotonic()
    together = audit_env("wait:Sub-v0", episodes=8, jobs=8)
    together_s = time.monotonic() - started
    started = time.monotonic()
    alone = audit_env("wait:Sub-v0", episodes=8)
    alone_s = time.monotonic() - started
    assert together.jobs == 8 and alone.jobs == 1
    assert _figures(together) == _figures(alone)
    assert together.right_mean == 1.0 and together.baseline_mean == 0.0
    assert together.errors == alone.errors == []
    assert together_s < alone_s / 2, (together_s, alone_s)


def test_explicit_jobs_give_the_same_figures_on_a_cpu_bound_env(gem_registry):
    gem.register("honest:Count-v0", CountEnv)
    assert _figures(audit_env("honest:Count-v0", episodes=8, jobs=4)) == _figures(
        audit_env("honest:Count-v0", episodes=8, jobs=1))


def test_lanes_queueing_for_a_shared_worker_are_not_taken_for_hangs(gem_registry):
    """Pins rg:arc_agi under lanes (127 episodes "no answer within 10 s"): 8 lanes queued for a grading pool of
    2 workers, and each step's wall time held its wait. A step takes 0.03-0.05 s alone here, under the 0.2 s
    timeout, but waits behind up to 3 others with 4 lanes: the timeout grows with the lanes, and the figures
    are those of playing alone."""
    gem.register("wait:OneWorker-v0", WaitsOnOneWorker, max_turns=2)
    together = audit_env("wait:OneWorker-v0", episodes=4, step_timeout=0.2, jobs=4)
    alone = audit_env("wait:OneWorker-v0", episodes=4, step_timeout=0.2, jobs=1)
    assert together.errors == alone.errors == []
    assert _figures(together) == _figures(alone)


class ChildTiedToItsThread(CountEnv):
    """Forks a helper process tied to the forking thread (PR_SET_PDEATHSIG, as bwrap --die-with-parent
    does), and pays only while it lives: a sandbox whose worker died mid-episode scores honest answers 0."""

    def __init__(self) -> None:
        super().__init__(high=10, max_turns=1)
        libc = ctypes.CDLL(None, use_errno=True)
        self.helper = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))

    def step(self, action: str) -> StepResult:
        observation, reward, terminated, truncated, info = super().step(action)
        time.sleep(0.01)  # a killed helper is reaped by the kernel at once; give the signal a moment
        alive = self.helper.poll() is None
        return observation, reward if alive else 0.0, terminated, truncated, info

    def audit_answers(self) -> tuple[str, str]:
        return f"\\boxed{{{self.target}}}", f"\\boxed{{{self.target % self.high + 1}}}"

    def close(self) -> None:
        self.helper.kill()
        self.helper.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("jobs", [1, 4])
def test_every_call_of_an_instance_runs_on_one_living_thread(gem_registry, jobs):
    """Pins the thread-per-call audit: each env call ran on a fresh thread that ended after it, so processes a
    sandbox tied to that thread died (gem-envs-code: reference solutions "killed by signal 9", code:HumanEval's
    right answer 0.84 instead of 1). Now an instance's make, reset and steps run on one thread that lives as
    long as the instance."""
    gem.register("tied:Child-v0", ChildTiedToItsThread)
    result = audit_env("tied:Child-v0", episodes=4, jobs=jobs)
    assert result.right_mean == 1.0 and result.errors == []
