"""Play each strategy, the honest baseline and the right answer on the same seeds.

Each env call runs in a daemon thread joined with ``step_timeout``: a hanging env ends that
episode (and the audit builds a fresh env instance), it never hangs the audit.

Lanes (the baseline, the right answer, each strategy) play the same seeds, each lane on one env
instance. With ``jobs`` > 1 they play concurrently on separate instances, in threads: worth it for an
env whose steps wait on something outside this process (a sandboxed shell); every lane still plays
every seed to the end, so the figures are those of playing the lanes one after another, for an env
whose instances are safe to step from several threads at once and whose steps end within the step
timeout (with lanes, the timeout grows with their number, as a step may wait for a pool or a core the
lanes share). Not the default: gem-envs-code's test runs fail now and then when instances are stepped
from several threads (code:MBPP's reference solutions scored 0.125 instead of 0.969), which would
change the figures; an env family that is safe opts in (``nox -s audit``'s ``AUDIT_JOBS``). An episode whose
reset or step raises, hangs or returns a non-number scores the env's failure reward
(:func:`gem.reward_range.failure_reward`: 0 where its reward range holds 0) and is counted in the
report's ``errors``.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gem.audit.report import EnvAudit, judge
from gem.audit.strategies import Strategy, Turn, strategies_for
from gem.errors import DataUnavailableError
from gem.reward_range import UNBOUNDED, failure_reward

#: turns per episode at most, for envs that never end on their own
MAX_TURNS = 100


class _Failed(Exception):
    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class _EnvThread:
    """One long-lived daemon thread that makes every call of one env instance, joined with a timeout.

    Not a fresh thread per call: a sandbox may tie the processes it forks to the thread that forked them
    (``PR_SET_PDEATHSIG``, bwrap's ``--die-with-parent``, fires when that *thread* ends), so a thread per
    call killed gem-envs-code's test processes as each step's thread ended, and reference solutions failed
    ("killed by signal 9", "the test harness failed": code:HumanEval's right answer scored 0.84, not 1)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event] | None] = (
            queue.SimpleQueue())
        threading.Thread(target=self._serve, daemon=True, name="gem-audit-env").start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, box, done = job
            try:
                box["value"] = fn()
            except BaseException as exc:  # any env failure is the episode's failure
                box["error"] = exc
            done.set()

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((fn, box, done))
        if not done.wait(timeout):
            raise _Failed(f"no answer within {timeout:g} s")
        if "error" in box:
            raise _Failed(f"{type(box['error']).__name__}: {box['error']}", box["error"])
        return box["value"]

    def stop(self) -> None:
        self._jobs.put(None)


def _without_rng(env: Any, fn: Callable[[], Any]) -> Any:
    """``fn()`` with the env's RNGs restored afterwards, so sampling for a strategy leaves the
    episode exactly as the baseline's on the same seed."""
    try:
        state = env.rng_state()
    except Exception:  # an env without the seeded RNGs: sample anyway
        state = None
    try:
        return fn()
    finally:
        if state is not None:
            env.set_rng_state(state)


def _samples(env: Any, k: int) -> list[str]:
    def draw() -> list[str]:
        try:
            return [str(env.sample_random_action()) for _ in range(k)]
        except Exception:  # no sampler: strategies fall back to the empty answer
            return []
    return _without_rng(env, draw)


def _answers(env: Any) -> tuple[str | None, str | None]:
    own = getattr(env, "audit_answers", None)
    if not callable(own):
        return None, None
    right, wrong = _without_rng(env, own)
    return right, wrong


class _Player:
    def __init__(self, env_id: str, make: Callable[[], Any], step_timeout: float) -> None:
        self.env_id, self.make, self.timeout = env_id, make, step_timeout
        self.worker = _EnvThread()
        try:
            self.env = self.worker.call(make, max(step_timeout, 120.0))
        except _Failed:
            self.worker.stop()
            raise
        self.errors: list[str] = []

    def close(self) -> None:
        try:
            self.worker.call(self.env.close, max(self.timeout, 10.0))
        except _Failed:  # closing is best effort
            pass
        self.worker.stop()

    def episode(self, act: Callable[[Any, Turn], str | None], seed: int) -> float | None:
        """The episode's return; ``None`` when ``act`` had no action (no right answer known)."""
        env = self.env
        total = 0.0
        try:
            observation, _ = self.worker.call(lambda: env.reset(seed=seed), self.timeout)
            limit = min(int(getattr(env.unwrapped, "max_turns", MAX_TURNS) or MAX_TURNS), MAX_TURNS)
            for _ in range(limit):
                turn = Turn(self.env_id, str(observation), lambda k: _samples(env, k))
                action = act(env, turn)
                if action is None:
                    return None
                observation, reward, terminated, truncated, _ = self.worker.call(lambda a=action: env.step(a),
                                                                                 self.timeout)
                if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
                    raise _Failed(f"reward {reward!r} is not a finite number")
                total += float(reward)
                if terminated or truncated:
                    break
        except _Failed as exc:
            self.errors.append(f"seed {seed}: {exc}")
            if "within" in str(exc):  # the old instance is stuck in its thread: a new thread, a new instance
                self.worker.stop()  # the stuck thread ends once its call returns, if ever
                self.worker = _EnvThread()
                self.env = self.worker.call(self.make, max(self.timeout, 120.0))
            return failure_reward(getattr(env, "reward_range", UNBOUNDED))
        return total


def _strategy_act(strategy: Strategy) -> Callable[[Any, Turn], str]:
    return lambda env, turn: strategy.act(turn)


def _baseline(played: set[str]) -> Callable[[Any, Turn], str]:
    """The honest baseline's act: the env's wrong answer, else a random in-format one; ``played`` collects
    which of the two it played (an env may know its right answer and still want a random baseline)."""
    def act(env: Any, turn: Turn) -> str:
        wrong = _answers(env)[1]
        if wrong is not None:
            played.add("wrong answer")
            return wrong
        played.add("random answer")
        return (turn.samples(1) or [""])[0]
    return act


def _right_act(env: Any, turn: Turn) -> str | None:
    return _answers(env)[0]


def audit_env(env_id: str, episodes: int = 32, seed: int = 0, step_timeout: float = 10.0,
              alpha: float = 0.01, make: Callable[[], Any] | None = None, jobs: int = 1) -> EnvAudit:
    """Audit one env id: every strategy, the baseline and the right answer on seeds
    ``seed .. seed + episodes - 1``; see :func:`gem.audit.report.judge` for the flags. ``jobs``: lanes
    played at once on separate env instances, in threads (see the module's docstring)."""
    if episodes < 2:
        raise ValueError("the audit needs at least 2 episodes to bound chance")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    import gem

    started = time.monotonic()
    try:
        player = _Player(env_id, make or (lambda: gem.make(env_id)), step_timeout)
    except _Failed as exc:
        if isinstance(exc.cause, DataUnavailableError):  # not the env's fault here: say so, don't fail
            return EnvAudit(env_id, episodes, seed, alpha, skipped=str(exc))
        return EnvAudit(env_id, episodes, seed, alpha, setup_error=str(exc))
    seeds = [seed + i for i in range(episodes)]
    kinds: set[str] = set()
    baseline_act = _baseline(kinds)
    strategies = strategies_for(env_id, player.env.unwrapped)
    lanes: list[Callable[[Any, Turn], str | None]] = [baseline_act, _right_act]
    lanes += [_strategy_act(s) for s in strategies]
    players = [player]
    if jobs > 1:
        # Lanes that share something bounded (a grading pool, the cores) queue for it, and a step's wall
        # time then includes its wait: each lane's step timeout grows with the lanes so that queueing is
        # not taken for a hang (rg:arc_agi: 127 episodes past 10 s behind a pool of 2 workers)
        player.timeout = step_timeout * jobs
    try:
        rewards = _play_lanes(players, lanes, seeds, jobs,
                              lambda: _Player(env_id, player.make, step_timeout * jobs))
        baseline = rewards.pop(0)
    finally:
        for each in players:
            each.close()
    baseline_name = " / ".join(sorted(kinds)) or "random answer"
    right = rewards[0]
    known = [r for r in right if r is not None]
    played = {s.name: (s, r) for s, r in zip(strategies, rewards[1:])}
    result = judge(env_id, episodes, seed, alpha, baseline_name, baseline,  # type: ignore[arg-type]
                   right if len(known) == episodes else None, played)  # type: ignore[arg-type]
    result.errors = [e for each in players for e in each.errors]
    result.jobs = jobs
    result.seconds = time.monotonic() - started
    return result


def _play_lanes(players: list[_Player], lanes: list[Callable[[Any, Turn], str | None]], seeds: list[int],
                jobs: int, new_player: Callable[[], _Player]) -> list[list[float | None]]:
    """Every lane on every seed, ``jobs`` lanes at a time, each on an env instance of its own while it plays
    (instances are made as needed, at most ``jobs``, and appended to ``players``)."""
    if jobs == 1 or len(lanes) == 1:
        return [[players[0].episode(act, s) for s in seeds] for act in lanes]
    free: queue.SimpleQueue[_Player] = queue.SimpleQueue()
    free.put(players[0])
    made = threading.Lock()

    def lane(act: Callable[[Any, Turn], str | None]) -> list[float | None]:
        try:
            player = free.get_nowait()
        except queue.Empty:
            with made:  # one make at a time: plugin imports and data loads are not all thread-safe
                try:
                    player = new_player()
                    players.append(player)
                except _Failed:  # no further instance: wait for one that another lane has finished with
                    player = free.get()
        try:
            return [player.episode(act, s) for s in seeds]
        finally:
            free.put(player)

    with ThreadPoolExecutor(max_workers=min(jobs, len(lanes)), thread_name_prefix="gem-audit-lane") as pool:
        return list(pool.map(lane, lanes))
