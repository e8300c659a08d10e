"""The ``ray`` backend: envs live in Ray actors, on this machine or across a cluster.

Envs are grouped into ``num_actors`` actors (default: one per CPU of the cluster, at
most one per env); each actor holds the envs' :class:`~gem.host.slot.Slot` objects,
so autoreset and ``on_error`` behave exactly as on the other backends. Calls to
different actors run in parallel.

The cluster is the one this process is already connected to (``ray.init`` was called),
else ``address`` (``backend_kwargs={"address": "head-host:6379"}``), else the
``RAY_ADDRESS`` environment variable, else a new local Ray instance; ``init_kwargs`` go
to ``ray.init``. An actor that dies (its process killed, its node lost) is replaced by a
new actor whose envs go back to their last snapshots, the calls since replayed, and the
calls the dead one left unanswered run again there one at a time: only a call that kills
the new actor too fails (a death says nothing of which call, if any, caused it). One that
hangs past ``step_timeout`` is replaced the same way, and its call fails. Only envs
without a state, or whose replay answers otherwise than before, report their lost
episodes on their next call, as with the process backend's dead worker
(``restore_siblings=False`` turns snapshots off, as there).

>>> envs = gem.make_vec(["game:GuessTheNumber-v0-easy"] * 64, backend="ray",  # doctest: +SKIP
...                     backend_kwargs={"address": "head-host:6379"})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import ray
    from ray.actor import ActorHandle
    from ray.exceptions import RayActorError
except ImportError as exc:
    raise ImportError("the 'ray' vector backend needs Ray: pip install 'gem-core[ray]'") from exc

from gem.core import Env
from gem.errors import VectorEnvError
from gem.host.calls import Call, run_remote
from gem.host.deadlines import collect
from gem.host.failures import Failure
from gem.host.recovery import Lost
from gem.host.slot import AutoresetMode, Slot
from gem.host.worker import SlotArgs
from gem.vector.base import VectorEnv


@ray.remote
class _SlotActor:
    """The slots of some envs, inside one Ray actor; calls to it run one at a time."""

    def __init__(self, slot_args: list[SlotArgs], restore_siblings: bool) -> None:
        self.slots: dict[int, Slot] = {}
        self.restore_siblings = restore_siblings
        self.failure: Failure | None = None
        for index, fn, env_id, mode, on_error in slot_args:
            try:
                self.slots[index] = Slot(index, fn, env_id, AutoresetMode(mode), on_error)
            except Exception as exc:  # reported by ready(): a raising constructor would only say "actor died"
                self.failure = Failure.from_exc(index, env_id, exc)
                return

    def ready(self) -> Failure | None:
        return self.failure

    def execute(self, calls: list[Call]) -> list[tuple[Any, bytes | None]]:
        snapshot = self.restore_siblings and len(self.slots) > 1  # a lone env has no sibling whose death it outlives
        return [run_remote(self.slots[c[0]], c, snapshot) for c in calls]

    def close(self) -> None:
        for slot in self.slots.values():
            slot.env.close()


@dataclass
class _Actor:
    handle: ActorHandle
    slot_args: list[SlotArgs]

    @property
    def indices(self) -> list[int]:
        return [a[0] for a in self.slot_args]


class RayVectorEnv(VectorEnv):
    """Envs in Ray actors; calls to different actors run in parallel.

    ``actor_options`` go to ``.options()`` of every actor (default
    ``{"scheduling_strategy": "SPREAD"}``: actors spread over the cluster's nodes);
    e.g. ``{"num_cpus": 1}`` reserves a CPU per actor, ``{"runtime_env": ...}`` ships
    code or packages to the nodes. ``restore_siblings=False``: actors take no snapshots, and
    the other envs of an actor that dies lose their episodes.

    >>> envs = gem.make_vec(["game:GuessTheNumber-v0-easy"] * 8, backend="ray",  # doctest: +SKIP
    ...                     backend_kwargs={"num_actors": 4})
    """

    backend = "ray"
    worker_names = ("Ray actor", "actor")

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_actors: int | None = None,
        address: str | None = None,
        init_kwargs: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        restore_siblings: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(env_fns, **kwargs)
        self._restore_siblings = restore_siblings
        self._actors: list[_Actor] = []
        if not ray.is_initialized():
            ray.init(address=address, **(init_kwargs or {}))
        self._actor_options = {"scheduling_strategy": "SPREAD", **(actor_options or {})}
        actors = max(1, min(num_actors or int(ray.cluster_resources().get("CPU", 1)), self.num_envs))
        self._owner: dict[int, int] = {}  # env index -> position of its actor in self._actors
        try:
            for position in range(actors):
                chunk = range(position, self.num_envs, actors)
                args = [(i, env_fns[i], self.env_ids[i], self.autoreset_mode.value, self.on_error) for i in chunk]
                self._actors.append(_Actor(self._new_actor(args), args))
                self._owner.update((i, position) for i in chunk)
            self._wait_ready(self._actors)  # all at once: actors start in parallel
        except BaseException:
            self._close()
            raise

    def _wait_ready(self, actors: list[_Actor]) -> None:
        for failure in ray.get([a.handle.ready.remote() for a in actors]):
            if failure is not None:
                raise VectorEnvError(
                    f"{failure.describe()} while being created in a Ray actor\n{failure.traceback}",
                    failure.index,
                    failure.env_id,
                )

    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        results: dict[int, Any] = {}
        # one task per call: an actor runs them in order, so each answer comes as soon as it is ready,
        # and a death or hang costs only the calls not yet answered
        waiting: dict[int, list[tuple[Call, Any]]] = {}
        for call in calls:
            if call[0] in self.recovery.lost:
                results[call[0]] = self.recovery.after_loss(call[0], call)
            else:
                position = self._owner[call[0]]
                waiting.setdefault(position, []).append((call, self._actors[position].handle.execute.remote([call])))

        def poll(positions: list[int], timeout: float | None) -> dict[int, tuple[list[Any], str | None]]:
            heads = {waiting[position][0][1]: position for position in positions}
            ready, _ = ray.wait(list(heads), num_returns=1, timeout=timeout)
            news: dict[int, tuple[list[Any], str | None]] = {}
            for ref in ready:
                try:
                    news[heads[ref]] = ([ray.get(ref)[0]], None)
                except RayActorError as exc:
                    news[heads[ref]] = ([], f"its Ray actor died ({type(exc).__name__})")
            return news

        def answered(item: tuple[Call, Any], answer: Any) -> None:
            results[item[0][0]] = self.recovery.answered(item[0], answer)

        collect(waiting, poll, self.step_timeout, answered,  # type: ignore[arg-type]
                lambda position, owed, died: self._lose_actor(position, owed, results, died))
        return [results[c[0]] for c in calls]

    def _lose_actor(self, position: int, pending: list[tuple[Call, Any]], results: dict[int, Any],
                    reason: str | None) -> None:
        """An actor died (``reason``) or hung (``None``) while running ``pending[0]``: a new
        actor takes its place and answers the calls by the host's one rerun
        (:meth:`~gem.host.recovery.Recovery.rerun`). The call it hung in fails; a death does
        not say which call, if any, caused it (its replies to calls it finished can be lost
        with it, and ``ray.kill`` from outside lands when it lands), so then every env goes back
        to its last snapshot (the replies lost were never recorded, so no call is replayed
        twice) and the calls run again there one at a time, so that a second death names its call."""
        calls = [(call[0], call) for call, _ in pending]
        culprit = calls.pop(0) if reason is None else None
        execute = self.recovery.one_at_a_time(lambda call: self._run_alone(position, call))
        results.update(self.recovery.rerun(self._actors[position].indices, lambda: self._replace(position), execute,
                                           culprit, calls, reason, restarted="replaced"))

    def _run_alone(self, position: int, call: Call) -> tuple[Any, bytes | None]:
        """One call on the (fresh) actor, waiting at most the step timeout for it."""
        ref = self._actors[position].handle.execute.remote([call])
        try:
            ready, _ = ray.wait([ref], num_returns=1, timeout=self.step_timeout)
            if not ready:
                raise Lost(call, None)
            return ray.get(ref)[0]
        except RayActorError as exc:
            raise Lost(call, f"its Ray actor died ({type(exc).__name__})") from None

    def _replace(self, position: int) -> None:
        """Start a new actor with fresh envs in place of a dead one."""
        dead = self._actors[position]
        ray.kill(dead.handle, no_restart=True)
        actor = _Actor(self._new_actor(dead.slot_args), dead.slot_args)
        self._actors[position] = actor
        self._wait_ready([actor])

    def _new_actor(self, slot_args: list[SlotArgs]) -> ActorHandle:
        return _SlotActor.options(**self._actor_options).remote(slot_args, self._restore_siblings)

    def _close(self) -> None:
        actors, self._actors = getattr(self, "_actors", []), []
        if not actors or not ray.is_initialized():  # at interpreter exit Ray may be shut down already
            return
        refs = [a.handle.close.remote() for a in actors]
        ray.wait(refs, num_returns=len(refs), timeout=10)  # a dead or stuck actor is killed below either way
        for actor in actors:
            ray.kill(actor.handle)
