"""The one VectorEnv contract that every backend implements."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gem.core import Env
from gem.errors import VectorEnvError
from gem.vector.slot import ON_ERROR, AutoresetMode, Failure, failure_info

Call = tuple[int, str, tuple, dict]  # (env index, method, args, kwargs)
Replayed = tuple[str, tuple, Any, Any]  # a call answered since an env's last snapshot: (method, args, obs, reward)


class VectorEnv(ABC):
    """``num_envs`` envs stepped together.

    ``step`` takes a list of actions (one per env) or a dict ``{index: action}`` that
    steps only those envs; with a dict, the results are in the dict's order (as in the
    reference package): ``obs[k]`` belongs to the ``k``-th key. Rewards, terminations and
    truncations are numpy arrays, observations and infos lists.
    """

    backend: str = "?"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        env_ids: Sequence[str | None] | None = None,
        seed: int | Sequence[int | None] | None = 0,
        autoreset_mode: str | AutoresetMode = "same_step",
        on_error: str = "raise",
        step_timeout: float | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("a vector env needs at least one env")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        try:
            self.autoreset_mode = AutoresetMode(getattr(autoreset_mode, "value", autoreset_mode))
        except ValueError:
            modes = ", ".join(m.value for m in AutoresetMode)
            raise ValueError(f"autoreset_mode must be one of {modes}, got {autoreset_mode!r}") from None
        self.num_envs = len(env_fns)
        self.env_ids = list(env_ids) if env_ids is not None else [None] * self.num_envs
        if step_timeout is not None and step_timeout <= 0:
            raise ValueError(f"step_timeout must be > 0 seconds, got {step_timeout}")
        self.on_error = on_error
        #: seconds one env's reset/step/call may take; an env that overruns is replaced
        self.step_timeout = step_timeout
        self._base_seed = seed
        self._closed = False
        #: backends whose envs live elsewhere (workers, actors): env index -> why its state was lost
        self._lost: dict[int, str] = {}
        #: the same backends: env index (once called) -> its slot's last snapshot, pickled (``None``:
        #: no state, or the backend was told not to keep them) ...
        self._snapshots: dict[int, bytes | None] = {}
        #: ... and the calls answered since, to replay: (method, args, observation, reward) each, only
        #: what :func:`~gem.vector.local.restore` needs (envs with a snapshot). No other references:
        #: holding answers (their info dicts) until the next snapshot costs the caller's garbage
        #: collector more than the calls themselves.
        self._replays: dict[int, list[Replayed]] = {}

    # -- what a backend implements ------------------------------------------------------
    @abstractmethod
    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        """Run the calls (at most one per env), returning a value or a Failure for each."""

    # -- the API ------------------------------------------------------------------------
    def reset(
        self,
        seed: int | Sequence[int | None] | None = None,
        indices: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset envs (all, or ``indices``); env ``i`` gets ``seed + i`` for an int seed.

        ``kwargs`` go to every env's ``reset``, except ``env{i}_kwargs={...}`` (the
        reference's form), which go to env ``i`` only: ``reset(env0_kwargs={"idx": 3})``.
        """
        indices = list(range(self.num_envs)) if indices is None else list(indices)
        own = {i: dict(kwargs.pop(f"env{i}_kwargs")) for i in range(self.num_envs) if f"env{i}_kwargs" in kwargs}
        if seed is None and self._base_seed is not None:
            # the first reset uses make_vec's seed: seed + i, or one seed (or None) per env
            first, self._base_seed = self._base_seed, None
            seeds: list[int | None] = (
                [first + i for i in indices] if isinstance(first, (int, np.integer)) else [first[i] for i in indices]
            )
        elif seed is None:
            seeds = [None] * len(indices)
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in indices]
        else:
            seeds = list(seed)
            if len(seeds) != len(indices):
                raise ValueError(f"got {len(seeds)} seeds for {len(indices)} envs")
        # a seed in env{i}_kwargs is that env's reset seed
        seeds = [own[i].pop("seed") if "seed" in own.get(i, {}) else s for i, s in zip(indices, seeds)]
        results = self._run([(i, "reset", (s, {**kwargs, **own.get(i, {})}), {}) for i, s in zip(indices, seeds)])
        return [r[0] for r in results], [r[1] for r in results]

    def step(
        self, actions: Sequence[Any] | Mapping[int, Any]
    ) -> tuple[Any, Any, Any, Any, Any]:
        """Step envs; see the class docstring for list versus dict actions."""
        if isinstance(actions, Mapping):
            indices = [int(i) for i in actions]
            bad = [i for i in indices if not 0 <= i < self.num_envs]
            if bad:
                raise IndexError(f"env indices {bad} out of range for {self.num_envs} envs")
            results = self._run([(i, "step", (actions[i],), {}) for i in indices])
        else:
            actions = list(actions)
            if len(actions) != self.num_envs:
                raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")
            results = self._run([(i, "step", (a,), {}) for i, a in enumerate(actions)])
        if not results:
            return [], np.zeros(0), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.bool_), []
        obs, rew, term, trunc, infos = zip(*results)
        return (
            list(obs),
            np.asarray(rew, dtype=np.float64),
            np.asarray(term, dtype=np.bool_),
            np.asarray(trunc, dtype=np.bool_),
            list(infos),
        )

    async def areset(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[dict[str, Any]]]:
        return await asyncio.to_thread(self.reset, *args, **kwargs)

    async def astep(self, actions: Sequence[Any] | Mapping[int, Any]) -> tuple[Any, Any, Any, Any, Any]:
        return await asyncio.to_thread(self.step, actions)

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """Call method ``name`` (or read attribute ``name``) on each env."""
        indices = list(range(self.num_envs)) if indices is None else list(indices)
        return self._run([(i, "call", (name, args, kwargs), {}) for i in indices])

    def sample_random_action(self) -> list[str]:
        """One random action per env."""
        return self.call("sample_random_action")

    def get_state(self) -> list[dict[str, Any]]:
        return self.call("get_state")

    def set_state(self, states: Sequence[dict[str, Any]]) -> None:
        for i, state in enumerate(states):
            self._run([(i, "call", ("set_state", (state,), {}), {})])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:
        pass

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_envs

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.num_envs} envs, backend={self.backend}>"

    # -- helpers --------------------------------------------------------------------------
    def _timed_out(self, index: int, call: Call, replaced: str) -> Failure:
        """The failure of a call that did not return within ``step_timeout``."""
        return Failure(index, self.env_ids[index], "StepTimeout",
                       f"{call[1]} did not return within {self.step_timeout} s; {replaced}", "")

    def _failed(self, index: int, call: Call, failure: Failure) -> Any:
        """Answer a call whose env failed outside its slot (its worker died or hung; it was
        replaced by a fresh env): a reset runs on the fresh env; a step under
        ``on_error="reset"`` starts a fresh episode with the failure in ``info``."""
        if call[1] == "reset":
            return self._execute([call])[0]
        if self.on_error == "reset" and call[1] == "step":
            reset = self._execute([(index, "reset", (None, {}), {})])[0]
            if isinstance(reset, Failure):
                return reset
            obs, info = reset
            return obs, 0.0, False, True, failure_info(failure, info)
        return failure

    def _answered(self, call: Call, answer: tuple[Any, bytes | None]) -> Any:
        """Keep what came with a worker's answer to ``call`` (:func:`~gem.vector.local.run_remote`):
        a new snapshot, or else the call, to replay after the last one; the answer's value."""
        value, snapshot = answer
        if snapshot is None:
            replay = self._replays.get(call[0])
            if replay is None:
                self._snapshots.setdefault(call[0], None)
            elif call[1] == "step":  # (obs, reward, terminated, truncated, info)
                replay.append(("step", call[2], value[0], value[1]))
            else:  # a reset's (obs, info), or any other call's value
                replay.append((call[1], call[2], value[0] if call[1] == "reset" else None, None))
        elif snapshot:
            self._snapshots[call[0]], self._replays[call[0]] = snapshot, []
        else:
            self._snapshots[call[0]] = None
            self._replays.pop(call[0], None)
        return value

    def _after_death(self, indices: Sequence[int], pending: Sequence[Call], failure: Failure,
                     reason: str) -> dict[int, Any]:
        """A worker (process, actor) holding envs ``indices`` died or hung while it ran
        ``pending[0]``, and a fresh worker with fresh envs took its place: that call fails
        (``failure``); the other envs go on in the fresh worker from their last snapshots, and
        the calls they answered since replayed (:func:`~gem.vector.local.restore`), and the
        calls after ``pending[0]``, which never ran, run there now. Only an env without a
        snapshot (no state), or whose restore fails or whose replay answers otherwise than
        before, lost its episode (``reason``, reported on its next call). The answers to
        ``pending``, by env index."""
        culprit = pending[0]
        self._forget(culprit[0])  # its env is a fresh one, with nothing to go on from
        self._restore([i for i in indices if i != culprit[0]], reason)
        answers = {culprit[0]: self._failed(culprit[0], culprit, failure)}
        rest = list(pending[1:])
        answers.update(zip([c[0] for c in rest], self._execute(rest) if rest else []))
        return answers

    def _restore(self, indices: Sequence[int], reason: str) -> None:
        """Put the envs ``indices`` of a fresh worker back where the dead one left them: each
        from its last snapshot with the calls it answered since replayed; an env without a
        snapshot (no state), or whose restore fails, lost its episode (``reason``). Envs never
        called stay fresh."""
        siblings = [i for i in indices if i in self._snapshots]
        restores = [(i, "restore", (self._snapshots[i], self._replays[i]), {})
                    for i in siblings if self._snapshots[i] is not None]
        restored = dict(zip([c[0] for c in restores], self._execute(restores) if restores else []))
        for i in siblings:
            if i not in restored:
                self._lost[i] = reason
            elif isinstance(restored[i], Failure):
                self._lost[i] = f"{reason}; its state could not be restored ({restored[i].describe()})"
            if i in self._lost:
                self._forget(i)

    def _forget(self, index: int) -> None:
        self._snapshots.pop(index, None)
        self._replays.pop(index, None)

    def _after_loss(self, index: int, call: Call) -> Any:
        """Answer the first call to an env whose episode was lost with a sibling's worker
        (process, actor) since its last call: it had no state to go on from (or restoring it
        failed). It did nothing wrong: a step under ``on_error="reset"`` is reported with
        ``info["episode_lost"]``, reward NaN (there is none: drop it) and ``truncated``, never
        as an ordinary episode end."""
        reason = self._lost.pop(index)
        failure = Failure(index, self.env_ids[index], "EpisodeLost", reason, "")
        if self.on_error == "reset" and call[1] == "step":
            answer = self._failed(index, call, failure)
            if isinstance(answer, Failure):
                return answer
            obs, _, terminated, truncated, info = answer
            return obs, float("nan"), terminated, truncated, {**info, "episode_lost": reason}
        return self._failed(index, call, failure)

    def _run(self, calls: Sequence[Call]) -> list[Any]:
        if self._closed:
            raise RuntimeError("this vector env is closed")
        results = self._execute(calls)
        failures = {c[0]: r for c, r in zip(calls, results) if isinstance(r, Failure)}
        if failures:
            first = next(iter(failures.values()))
            others = "".join(f"\n{f.describe()}" for f in list(failures.values())[1:])
            raise VectorEnvError(
                f"{first.describe()}{others}\n--- traceback of env {first.index} ---\n{first.traceback}",
                first.index,
                first.env_id,
                results={c[0]: r for c, r in zip(calls, results) if not isinstance(r, Failure)},
                failures=failures,
            )
        return results
