"""Restarts and lost-episode reports for envs that live in workers (processes, Ray actors).

A worker answers each call as soon as it is done, and a worker holding several envs sends,
now and then, an env's snapshot with its answer (:meth:`~gem.host.slot.Slot.checkpoint`).
:class:`Recovery` keeps the last snapshot of each env and the calls it answered since.
When a worker dies or hangs past its deadline (it is killed) and a fresh one with fresh
envs takes its place, the call it ran fails (:data:`~gem.host.failures.WORKER_DIED` /
:data:`~gem.host.failures.STEP_TIMEOUT`) and its other envs go on from their snapshots with
the calls since replayed. Only an env without a snapshot, or whose restore fails or whose
replay answers otherwise, lost its episode; it says so on its next call
(:data:`~gem.host.failures.EPISODE_LOST`): raised, or with ``on_error="reset"`` as a
truncated step with reward NaN and ``info["episode_lost"]``, never as an ordinary
episode end.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from gem.host.calls import Call, Replayed
from gem.host.failures import Failure, episode_lost, failure_info, timed_out, worker_died


class Lost(Exception):
    """A fresh worker died (``died`` says how) or hung past the step timeout (``None``; it
    was killed) under ``call`` while :meth:`Recovery.rerun` ran it."""

    def __init__(self, call: Call, died: str | None) -> None:
        super().__init__(died)
        self.call, self.died = call, died


class Recovery:
    """What a backend with workers keeps to recover from a worker's death, and the rules
    that answer the calls it cost.

    ``execute`` runs calls on the backend (at most one per env) and returns a value or a
    :class:`Failure` for each; ``worker`` names a worker in messages ("worker process",
    "Ray actor"), ``short`` for short ("worker", "actor")."""

    def __init__(self, env_ids: Sequence[str | None], on_error: str, step_timeout: float | None,
                 execute: Callable[[Sequence[Call]], list[Any]], worker: str = "worker process",
                 short: str = "worker") -> None:
        self.env_ids = env_ids
        self.on_error = on_error
        self.step_timeout = step_timeout
        self.execute = execute
        self.worker, self.short = worker, short
        #: env index -> why its episode was lost (reported on its next call)
        self.lost: dict[int, str] = {}
        #: env index (once called) -> its slot's last snapshot, pickled (``None``: no state, or
        #: the backend was told not to keep them) ...
        self.snapshots: dict[int, bytes | None] = {}
        #: ... and the calls answered since, to replay: (method, args, observation, reward) each, only
        #: what :func:`~gem.host.calls.restore` needs (envs with a snapshot). No other references:
        #: holding answers (their info dicts) until the next snapshot costs the caller's garbage
        #: collector more than the calls themselves.
        self.replays: dict[int, list[Replayed]] = {}

    def answered(self, call: Call, answer: tuple[Any, bytes | None]) -> Any:
        """Keep what came with a worker's answer to ``call`` (:func:`~gem.host.calls.run_remote`):
        a new snapshot, or else the call, to replay after the last one; the answer's value."""
        value, snapshot = answer
        if snapshot is None:
            replay = self.replays.get(call[0])
            if replay is None:
                self.snapshots.setdefault(call[0], None)
            elif call[1] == "step":  # (obs, reward, terminated, truncated, info)
                replay.append(("step", call[2], value[0], value[1]))
            else:  # a reset's (obs, info), or any other call's value
                replay.append((call[1], call[2], value[0] if call[1] == "reset" else None, None))
        elif snapshot:
            self.snapshots[call[0]], self.replays[call[0]] = snapshot, []
        else:
            self.snapshots[call[0]] = None
            self.replays.pop(call[0], None)
        return value

    def failed(self, index: int, call: Call, failure: Failure) -> Any:
        """Answer a call whose env failed outside its slot (its worker died or hung, its thread
        was abandoned; a fresh env took its place): a reset runs on the fresh env; a step under
        ``on_error="reset"`` starts a fresh episode with the failure in ``info``."""
        if call[1] == "reset":
            return self.execute([call])[0]
        if self.on_error == "reset" and call[1] == "step":
            reset = self.execute([(index, "reset", (None, {}), {})])[0]
            if isinstance(reset, Failure):
                return reset
            obs, info = reset
            return obs, 0.0, False, True, failure_info(failure, info)
        return failure

    def worker_lost(self, indices: Sequence[int], pending: Sequence[Call], died: str | None,
                    restarted: str = "restarted") -> dict[int, Any]:
        """The worker holding envs ``indices`` died (``died`` says how) or hung past the step
        timeout (``None``; it was killed) while it ran ``pending[0]``, and a fresh worker
        (``restarted``: how it came) holds fresh envs now: :meth:`after_death` with the
        failure and the reason that say so. The answers to ``pending``, by env index."""
        culprit = pending[0]
        index = culprit[0]
        if died is None:
            failure = timed_out(index, self.env_ids[index], culprit[1], self.step_timeout,
                                f"its {self.worker} was killed and {restarted}")
            reason = f"env {index} of its {self.worker} hung and the {self.short} was {restarted}"
        else:
            joint = "; it was" if restarted == "restarted" else " and was"
            failure = worker_died(index, self.env_ids[index], f"{died}{joint} {restarted} with a fresh env")
            reason = f"{died} while env {index} ran; it was {restarted}"
        return self.after_death(indices, pending, failure, reason)

    def after_death(self, indices: Sequence[int], pending: Sequence[Call], failure: Failure,
                    reason: str) -> dict[int, Any]:
        """A worker holding envs ``indices`` died or hung while it ran ``pending[0]``, and a
        fresh worker with fresh envs took its place: that call fails (``failure``); the other
        envs go on in the fresh worker from their last snapshots, and the calls they answered
        since replayed (:func:`~gem.host.calls.restore`), and the calls after ``pending[0]``,
        which never ran, run there now. Only an env without a snapshot (no state), or whose
        restore fails or whose replay answers otherwise than before, lost its episode
        (``reason``, reported on its next call). The answers to ``pending``, by env index."""
        culprit = pending[0]
        self.forget(culprit[0])  # its env is a fresh one, with nothing to go on from
        self.restore([i for i in indices if i != culprit[0]], reason)
        answers = {culprit[0]: self.failed(culprit[0], culprit, failure)}
        rest = list(pending[1:])
        answers.update(zip([c[0] for c in rest], self.execute(rest) if rest else []))
        return answers

    def restore(self, indices: Sequence[int], reason: str) -> None:
        """Put the envs ``indices`` of a fresh worker back where the dead one left them: each
        from its last snapshot with the calls it answered since replayed; an env without a
        snapshot (no state), or whose restore fails, lost its episode (``reason``). Envs never
        called stay fresh."""
        siblings = [i for i in indices if i in self.snapshots]
        restores = [(i, "restore", (self.snapshots[i], self.replays[i]), {})
                    for i in siblings if self.snapshots[i] is not None]
        restored = dict(zip([c[0] for c in restores], self.execute(restores) if restores else []))
        for i in siblings:
            if i not in restored:
                self.lost[i] = reason
            elif isinstance(restored[i], Failure):
                self.lost[i] = f"{reason}; its state could not be restored ({restored[i].describe()})"
            if i in self.lost:
                self.forget(i)

    def forget(self, index: int) -> None:
        self.snapshots.pop(index, None)
        self.replays.pop(index, None)

    def after_loss(self, index: int, call: Call) -> Any:
        """Answer the first call to an env whose episode was lost with a sibling's worker
        since its last call: it had no state to go on from (or restoring it failed). It did
        nothing wrong: a step under ``on_error="reset"`` is reported with
        ``info["episode_lost"]``, reward NaN (there is none: drop it) and ``truncated``, never
        as an ordinary episode end."""
        reason = self.lost.pop(index)
        failure = episode_lost(index, self.env_ids[index], reason)
        if self.on_error == "reset" and call[1] == "step":
            answer = self.failed(index, call, failure)
            if isinstance(answer, Failure):
                return answer
            obs, _, terminated, truncated, info = answer
            return obs, float("nan"), terminated, truncated, {**info, "episode_lost": reason}
        return self.failed(index, call, failure)

    def one_at_a_time(self, run: Callable[[Call], tuple[Any, bytes | None]]) -> Callable[[Sequence[Call]], list[Any]]:
        """An ``execute`` for :meth:`rerun`: the calls one after another through ``run`` (one
        call on the fresh worker and its answer, raising :class:`Lost` if the worker dies or
        hangs), each env whose episode was lost answered for instead."""

        def execute(calls: Sequence[Call]) -> list[Any]:
            answers = []
            for call in calls:
                if call[0] in self.lost:
                    answers.append(self.after_loss(call[0], call))
                else:
                    answers.append(self.answered(call, run(call)))
            return answers

        return execute

    def rerun(self, indices: Sequence[int], restart: Callable[[], Any], execute: Callable[[Sequence[Call]], list[Any]],
              culprit: tuple[Hashable, Call] | None, suspects: Sequence[tuple[Hashable, Call]], died: str | None,
              restarted: str = "restarted") -> dict[Hashable, Any]:
        """The one culprit rerun, for every transport: a worker holding envs ``indices`` died
        (``died`` says how) or hung (``None``; it was killed) owing calls, each ``(key, call)``.
        If the call that did it is known (``culprit``: the one it hung in, or the first one
        unanswered of a worker that runs its calls in order) it fails as :meth:`worker_lost`
        says; otherwise (calls side by side, or replies a death can lose) every env goes back
        to its state. Then ``suspects``, the other calls owed, run again one at a time, so that
        a second death names its call. ``restart`` starts a fresh worker (and throws away the
        dead one), ``execute`` runs calls on it one at a time (:meth:`one_at_a_time`); this
        repeats until every call is answered: each attempt answers a call, names a culprit or
        gives up an env. The answers, by key."""
        suspects = list(suspects)
        answers: dict[Hashable, Any] = {}
        saved, self.execute = self.execute, execute
        try:
            for _ in range(len(suspects) + len(indices) + 2):
                restart()
                try:
                    if culprit is not None:
                        answers[culprit[0]] = self.worker_lost(indices, [culprit[1]], died, restarted)[culprit[1][0]]
                        culprit = None
                    else:
                        how = f"while it ran {len(suspects)} calls" if suspects else "between calls"
                        self.restore(indices, f"{died} {how}; it was {restarted}")
                    while suspects:
                        answers[suspects[0][0]] = self.execute([suspects[0][1]])[0]
                        suspects.pop(0)
                    return answers
                except Lost as lost:
                    if suspects and lost.call is suspects[0][1]:  # the call that killed it, named
                        culprit = suspects.pop(0)
                    elif culprit is not None and lost.call is culprit[1]:  # a reset on its fresh env killed it too
                        index = culprit[1][0]
                        answers[culprit[0]] = worker_died(index, self.env_ids[index],
                                                          f"{lost.died or 'it hung'}; it was {restarted}")
                        culprit = None
                    else:  # restoring an env's state killed it: that env lost its episode
                        index = lost.call[0]
                        self.forget(index)
                        self.lost[index] = (f"its state could not be restored (restoring it killed a fresh "
                                            f"{self.worker})")
                    died = lost.died
            raise RuntimeError(f"the {self.worker} kept dying while its envs were being restored")
        finally:
            self.execute = saved
