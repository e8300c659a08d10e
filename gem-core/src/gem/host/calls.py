"""One call on one env's slot, wherever the slot lives.

A call is ``(env index, method, args, kwargs)``; ``method`` is ``reset`` (args: seed,
reset kwargs), ``step`` (args: the action), ``call`` (args: name, args, kwargs) or
``restore`` (args: a snapshot and the calls to replay after it). The slot is a
:class:`~gem.host.slot.Slot` (anything with its ``reset``/``step``/``call``/``restore``/
``checkpoint``).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from typing import Any

from gem.host.failures import Failure

Call = tuple[int, str, tuple, dict]  # (env index, method, args, kwargs)
Replayed = tuple[str, tuple, Any, Any]  # a call answered since an env's last snapshot: (method, args, obs, reward)


def run_call(slot: Any, call: Call) -> Any:
    """Execute one call on a slot; an exception becomes a :class:`Failure`."""
    _, method, args, kwargs = call
    try:
        if method == "reset":
            seed, reset_kwargs = args
            return slot.reset(seed, reset_kwargs)
        if method == "step":
            return slot.step(args[0])
        if method == "call":
            return slot.call(*args)
        if method == "restore":
            return restore(slot, *args)
        raise ValueError(f"unknown vector call {method!r}")
    except Exception as exc:
        return Failure.from_exc(slot.index, slot.env_id, exc)


def run_remote(slot: Any, call: Call, snapshot: bool) -> tuple[Any, bytes | None]:
    """:func:`run_call` in a worker process or actor: the answer, and with ``snapshot`` (the
    worker holds other envs: if a call of one of them kills the worker, this env goes on in a
    fresh one) what :meth:`~gem.host.slot.Slot.checkpoint` says after the call; the caller
    keeps it (:meth:`~gem.host.recovery.Recovery.answered`) and reads it only after a death."""
    if not snapshot:
        return run_call(slot, call), None
    start = time.perf_counter()
    answer = run_call(slot, call)
    args = call[2]
    return answer, slot.checkpoint(args[0] if args else None, answer, time.perf_counter() - start)


class ReplayDiverged(RuntimeError):
    """A call replayed after a restore answered otherwise than it did before the worker died."""


def restore(slot: Any, snapshot: bytes, replay: Sequence[Replayed] = ()) -> None:
    """Put a fresh slot where a dead worker's was: its last snapshot, then the calls answered
    since (``replay``), whose steps must answer the same observation and reward as before, and
    whose resets the same observation."""
    slot.restore(pickle.loads(snapshot))
    for n, (method, args, obs, reward) in enumerate(replay, 1):
        answer = run_call(slot, (slot.index, method, args, {}))
        failed = isinstance(answer, Failure)
        if method == "step":
            expected, got = (obs, reward), answer if failed else (answer[0], answer[1])
        elif method == "reset":
            expected, got = obs, answer if failed else answer[0]
        else:  # other calls' results need not compare, but they answered before
            expected = "an answer"
            got = answer if failed else expected
        if not _same(got, expected):
            raise ReplayDiverged(
                f"replaying its {method} {n} of {len(replay)} since its last snapshot answered "
                f"{_short(got)}, not {_short(expected)} as before: the env is not deterministic "
                "given its get_state() and the action"
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN rewards
    try:
        return bool(a == b)
    except Exception:  # arrays and the like: compare their bytes
        return pickle.dumps(a) == pickle.dumps(b)


def _short(value: Any) -> str:
    text = value.describe() if isinstance(value, Failure) else repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."
