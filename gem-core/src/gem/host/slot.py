"""One env as the host holds it (a sub-env of a vector env, an env of a run's worker process),
with autoreset and error policy.

A slot lives wherever its env lives (the caller's process, a thread, a worker
process, a Ray actor), so every backend shares these semantics exactly. A slot's
:meth:`~Slot.snapshot` is what a fresh slot needs to go on from where it is
(:meth:`~Slot.restore`): the process and Ray backends keep the last one of each env and
the calls made since, so that when a worker dies its other envs go on in a fresh worker
(restored, then the calls replayed). :meth:`~Slot.checkpoint` decides when a worker takes
one, so that it costs little next to the env's own work.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from enum import Enum
from sys import getsizeof
from time import perf_counter
from typing import Any

from gem.core import Env
from gem.host.failures import Failure, failure_info


class AutoresetMode(str, Enum):
    """When a finished sub-env starts its next episode.

    - ``same_step`` (default, as in GEM): the step that ends an episode resets the env
      and returns the new episode's first observation; the ending observation and info
      are in ``info["final_obs"]`` / ``info["final_info"]``.
    - ``next_step``: the step after the ending one resets the env (its action is
      ignored) and returns the new first observation with reward 0.
    - ``disabled``: the caller resets finished envs with ``reset(indices=[...])``.
    """

    SAME_STEP = "same_step"
    NEXT_STEP = "next_step"
    DISABLED = "disabled"


ON_ERROR = ("raise", "reset")

#: what :meth:`Slot.checkpoint` answers for an env without a state (a pickled snapshot is never empty)
NO_STATE = b""
#: a worker snapshots an env again after this many of its calls, ...
SNAPSHOT_CALLS = 1000
#: ... or once their actions and observations reach this size (the caller keeps them until
#: the next snapshot, to replay them and compare), ...
SNAPSHOT_BYTES = 256 * 1024
#: ... or once they took this long (the most a replay after a death redoes), ...
SNAPSHOT_SECONDS = 0.1
#: ... or this many times what the last snapshot took, if longer: an env whose get_state is
#: costly spends at most about 1/20 of its time on snapshots
SNAPSHOT_COST_RATIO = 20


class Slot:
    """Owns one env; applies autoreset and ``on_error`` around its reset and step."""

    def __init__(
        self,
        index: int,
        env_fn: Callable[[], Env],
        env_id: str | None,
        autoreset_mode: AutoresetMode,
        on_error: str,
    ) -> None:
        self.index = index
        self.env_fn = env_fn
        self.env_id = env_id
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.on_error = on_error
        self.env = env_fn()
        self.needs_reset = False
        #: the env has no state to snapshot (its get_state is not implemented or returns None)
        self.stateless = False
        # what is left until the next snapshot: calls, bytes, seconds of calls (none: the first
        # call snapshots, with nothing to go on from yet)
        self._calls_left, self._bytes_left, self._seconds_left = 0, 0, 0.0

    def reset(self, seed: int | None = None, kwargs: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self.needs_reset = False
        if self.on_error != "reset":
            return self.env.reset(seed=seed, **(kwargs or {}))
        return self._reset_or_report(seed, kwargs)

    def _reset_or_report(self, seed: int | None = None, kwargs: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """A reset that never raises (``on_error="reset"``): a failing reset is tried once more
        on a freshly built env; if that fails too, the observation is empty, ``info`` says
        why, and the env's next step resets it again."""
        try:
            return self.env.reset(seed=seed, **(kwargs or {}))
        except Exception as first:
            failure = Failure.from_exc(self.index, self.env_id, first)
        try:
            self.replace()
            obs, info = self.env.reset(seed=seed, **(kwargs or {}))
            self.needs_reset = False
            return obs, {**info, "reset_error": failure.describe()}
        except Exception as second:
            self.needs_reset = True
            failure = Failure.from_exc(self.index, self.env_id, second)
            return "", {"reset_error": failure.describe(), "error_type": failure.type}

    def replace(self) -> None:
        """Build a fresh env in place of this one (closing the old one where it lets us); its
        next step starts an episode, as after ``next_step`` autoreset."""
        old, self.env = self.env, None
        try:
            old.close()
        except Exception:  # a broken env may fail to close; it is dropped either way
            pass
        self.env = self.env_fn()
        self.needs_reset = True

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if self.needs_reset:  # next_step mode, or a reset that failed: this step only starts the next episode
            obs, info = self.reset()
            return obs, 0.0, False, False, info
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:
            if self.on_error != "reset":
                raise
            return self.recover(Failure.from_exc(self.index, self.env_id, exc))
        terminated, truncated, reward = bool(terminated), bool(truncated), float(reward)
        if terminated or truncated:
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                final_obs, final_info = obs, info
                obs, info = self.reset()
                info = {**info, "final_obs": final_obs, "final_info": final_info}
            elif self.autoreset_mode is AutoresetMode.NEXT_STEP:
                self.needs_reset = True
        return obs, reward, terminated, truncated, info

    def recover(self, failure: Failure) -> tuple[Any, float, bool, bool, dict]:
        """After a failure: start a fresh episode and report the failure in info."""
        obs, info = self.reset()
        return obs, 0.0, False, True, failure_info(failure, info)

    def snapshot(self) -> dict[str, Any] | None:
        """What a fresh slot needs to go on from here with :meth:`restore`; ``None`` for an env
        without a state (``get_state`` raises ``NotImplementedError`` or returns ``None``)."""
        if self.stateless:
            return None
        try:
            state = self.env.get_state()
        except NotImplementedError:
            self.stateless = True
            return None
        except Exception:  # a snapshot is best effort: without one this env's episode is reported lost
            return None
        if state is None:
            self.stateless = True
            return None
        return {"env": state, "needs_reset": self.needs_reset}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Go on from a :meth:`snapshot` (taken of this env's slot in a worker that died)."""
        self.env.set_state(snapshot["env"])
        self.needs_reset = bool(snapshot["needs_reset"])
        self._seconds_left = 0.0  # with the calls replayed after this: the caller need not keep them

    def checkpoint(self, action: Any, answer: Any, seconds: float) -> bytes | None:
        """After a call (``action``: its argument, ``answer``: its result, which took ``seconds``)
        in a worker that may die under this env's siblings: this slot's :meth:`snapshot`,
        pickled, when one is due, :data:`NO_STATE` for an env without a state, else ``None``
        (the caller keeps the call, to replay it after the last snapshot). A failed call
        snapshots at once: only calls that answered are ever replayed. Cheap when none is due:
        it runs after every call."""
        if self.stateless:
            return None
        self._calls_left -= 1
        self._seconds_left -= seconds
        obs = answer[0] if type(answer) is tuple else answer
        # strings (most actions and observations) by len(): getsizeof costs more than all the rest here
        self._bytes_left -= ((len(action) if type(action) is str else getsizeof(action, 0))
                             + (len(obs) if type(obs) is str else getsizeof(obs, 0)))
        if self._calls_left > 0 and self._bytes_left > 0 and self._seconds_left > 0 and type(answer) is not Failure:
            return None
        start = perf_counter()
        state = self.snapshot()
        if state is None:
            self._seconds_left = 0.0  # tried again on the next call, unless the env has no state at all
            return NO_STATE
        try:
            data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a state that cannot leave the worker is as good as none
            self.stateless = True
            return NO_STATE
        self._calls_left, self._bytes_left = SNAPSHOT_CALLS, SNAPSHOT_BYTES
        self._seconds_left = max(SNAPSHOT_SECONDS, SNAPSHOT_COST_RATIO * (perf_counter() - start))
        return data

    def call(self, name: str, args: tuple = (), kwargs: dict[str, Any] | None = None) -> Any:
        if name == "reset":
            return self.reset(*args, **(kwargs or {}))
        if name == "step":
            return self.step(*args)
        attr = getattr(self.env, name)
        return attr(*args, **(kwargs or {})) if callable(attr) else attr
