"""Episodes that stay in flight across iterations (``rollout.carry_over``).

With the per-iteration rollout (:func:`gem_train.rollout.collect`) an iteration ends when its
last episode does, so the engine idles while the longest episode plays out its turns. Here one
runner call (:func:`gem.runner.run_episodes` fed an endless iterator of seeds) plays the whole
run's episodes, ``rollout.concurrency`` at a time, each as soon as a slot frees:
:meth:`EpisodeStream.take` runs it until enough whole groups have finished for an iteration,
then closes the gate (no new request reaches the engine; those in it finish) and returns them.
While the trainer updates, nothing runs in the stream's event loop; the next ``take`` opens the
gate and the episodes that were mid-way carry on under the new weights.

The stream begins new episodes only while those begun and those finished but not yet taken are fewer than
``1 + max_staleness`` iterations' worth (``rollout.concurrency`` caps them too): it fills the engine while
an iteration's slowest episodes finish, and what it carries over is at most about ``max_staleness``
versions old when it is trained on.

Each turn's sample is tagged with the policy version that drew it (:attr:`TurnSample.version`,
the updates applied when its request went to the engine: weights change only while no request
is in flight). The trainer leaves out of the loss every turn more than ``rollout.max_staleness``
versions old (their rewards still count in their episode's returns), and the reinforce loss
weighs the others by truncated importance sampling against the sampler's log-probs
(``algo.tis_cap``; see :func:`effective_tis_cap`).

Time spent paused counts against ``rollout.episode_timeout`` (an episode's clock runs through
the update), not against ``step_timeout`` (a step caught by the pause finishes in its thread
and is handed back when the loop runs again).

>>> stream = EpisodeStream(make_env, policy, seed_of_group=lambda g: 1000 + g, group_size=1,  # doctest: +SKIP
...                        concurrency=32, max_turns=8)
>>> episodes = stream.take(episodes=32)   # whole groups, in the order they finished   # doctest: +SKIP
>>> stream.advance()                      # after the engine got the new weights     # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from typing import Any

from gem.runner import EpisodeContext, Trajectory, run_episodes
from gem_train.metrics_log import show
from gem_train.rollout import EnginePolicy, Episode, TurnSample, to_episode

#: seconds between the lines a rollout still under way prints (a long first iteration at paper scale is not silent)
HEARTBEAT_S = 60.0

#: the truncation cap of the importance weights of a carried-over run whose reinforce loss sets none
STALE_TIS_CAP = 2.0


def effective_tis_cap(tis_cap: float | None, loss: str, carry_over: bool) -> float | None:
    """``algo.tis_cap``, or with ``rollout.carry_over`` and the reinforce loss (which has no ratio of its own)
    :data:`STALE_TIS_CAP`: samples from older weights are weighed by ``min(pi / mu, cap)``. The ``ppo_clip``
    loss's clipped ratio to the sampler is its correction already.

    >>> effective_tis_cap(None, "reinforce", True), effective_tis_cap(None, "reinforce", False)
    (2.0, None)
    """
    if tis_cap is None and carry_over and loss == "reinforce":
        return STALE_TIS_CAP
    return tis_cap


def staleness_mask(samples: list[TurnSample], version: int, max_staleness: int | None) -> list[bool]:
    """Which samples may be trained on by the policy of ``version``: at most ``max_staleness`` versions old.

    >>> s = [TurnSample([1], [2], [-0.1], "stop", version=v) for v in (0, 2, 3)]
    >>> staleness_mask(s, version=3, max_staleness=1)
    [False, True, True]
    """
    if max_staleness is None:
        return [True] * len(samples)
    return [version - s.version <= max_staleness for s in samples]


class _Gate:
    """The runner's policy inside a stream: holds new requests while closed, holds an episode's first request
    until ``may_start(index)`` says it may begin, counts the requests in flight, and tags each sample with the
    version it was drawn by."""

    def __init__(self, policy: EnginePolicy, may_start: Callable[[int], bool]) -> None:
        self.policy, self.may_start = policy, may_start
        self.version = 0
        self.in_flight = 0
        self._open = asyncio.Event()
        self._idle = asyncio.Event()
        self._changed = asyncio.Event()
        self._open.set()
        self._idle.set()

    def changed(self) -> None:
        """Wake the held requests to look again (an episode ended, the gate opened, a take emptied the pool)."""
        self._changed.set()
        self._changed.clear()  # every waiter is woken already; the next change wakes them again

    async def act(self, observation: Any, context: EpisodeContext | None = None) -> tuple[str, dict[str, Any]]:
        first = context is not None and context.turn == 0
        while not self._open.is_set() or (first and not self.may_start(context.index)):  # type: ignore[union-attr]
            await self._changed.wait()
        self.in_flight += 1
        self._idle.clear()
        version = self.version
        try:
            action, info = await self.policy.act(observation, context)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()
        info["sample"].version = version
        return action, info

    def open(self) -> None:
        self._open.set()
        self.changed()

    async def close(self) -> None:
        """Let no new request through and wait until those in the engine are answered."""
        self._open.clear()
        await self._idle.wait()


class EpisodeStream:
    """One runner call playing the run's episodes; :meth:`take` hands out an iteration's worth at a time.

    ``seed_of_group(g)`` is the reset seed of the ``g``-th group (from ``first_group``); each group is
    ``group_size`` episodes of one seed, and a group is handed out only whole. ``limits`` are the runner's
    ``step_timeout``, ``episode_timeout`` and ``processes``: with any of them an episode that fails ends
    alone (:attr:`Episode.error`), else the first error stops the stream and :meth:`take` raises it.
    ``loop`` is the event loop the stream runs in (a test passes one with a virtual clock).
    """

    def __init__(self, make_env: Callable[[], Any], policy: EnginePolicy, seed_of_group: Callable[[int], int],
                 group_size: int, concurrency: int, max_turns: int | None, *, first_group: int = 0,
                 max_staleness: int | None = 1, loop: asyncio.AbstractEventLoop | None = None,
                 heartbeat_s: float | None = HEARTBEAT_S, **limits: Any) -> None:
        self.policy = policy
        self.heartbeat_s = heartbeat_s
        self.seed_of_group, self.group_size, self.first_group = seed_of_group, group_size, first_group
        self.loop = loop if loop is not None else asyncio.new_event_loop()
        self._make_env, self._concurrency, self._max_turns, self._limits = make_env, concurrency, max_turns, limits
        self._limited = any(value is not None for value in limits.values())
        self._gate: _Gate | None = None
        self._task: asyncio.Task | None = None
        self._partial: dict[int, list[Episode]] = {}
        self._ready: list[list[Episode]] = []
        self._arrived: asyncio.Event | None = None
        self._failed_in_row = 0
        # the groups whose episodes have started: a resumed run starts after them
        self.started_groups = 0
        self.max_staleness = max_staleness
        # groups begun (their first request let through) and not yet finished, and how many episodes may be begun
        # or waiting in the pool at once (set per take)
        self._active: set[int] = set()
        self.begun_groups = 0  # groups whose first request went to the engine
        self._budget = 0
        self._finished_turns = self._finished_episodes = 0
        #: the take under way: (episodes, turns)
        self._want: tuple[int, int | None] = (0, None)

    @property
    def version(self) -> int:
        """The policy version the engine serves (updates applied since the stream started)."""
        return self._gate.version if self._gate is not None else 0

    @property
    def next_group(self) -> int:
        """The first group no episode has started (where a resumed run's stream begins)."""
        return self.first_group + self.started_groups

    def advance(self) -> None:
        """The engine serves the next policy version (call after its weights were replaced)."""
        if self._gate is not None:
            self._gate.version += 1

    def take(self, episodes: int, turns: int | None = None) -> list[Episode]:
        """Whole groups in the order they finished: until they hold ``episodes`` episodes, or with ``turns``
        until their intact episodes hold that many turns. Returns with the stream paused."""
        self.loop.run_until_complete(self._until(episodes, turns))
        taken: list[Episode] = []
        while self._ready and not self._enough(taken, episodes, turns):
            taken.extend(self._ready.pop(0))
        return taken

    def _may_start(self, index: int) -> bool:
        """An episode begins when its group has, or when the episodes begun and waiting in the pool are fewer
        than the budget: the stream runs at most ``1 + max_staleness`` iterations' worth ahead, so what it
        carries over finishes within the staleness bound instead of piling up (``rollout.concurrency`` far
        above an iteration's need would otherwise leave most turns too old to train on)."""
        group = self.first_group + index // self.group_size
        if group in self._active:
            return True
        waiting = sum(len(members) for members in self._ready)
        if len(self._active) * self.group_size + waiting >= self._budget:
            return False
        self._active.add(group)
        self.begun_groups += 1
        return True

    def _set_budget(self) -> None:
        """The episodes the take under way needs, times ``1 + max_staleness``. With ``turns``: the episodes in
        the pool and, for the turns they lack, as many more as the mean length so far takes. Set as the take
        begins and again as each episode finishes: while the take lacks turns the budget stays above the pool,
        so episodes shorter than the mean so far (the first take's, or a policy that learnt to finish sooner)
        never stop the stream from beginning the ones it still needs."""
        episodes, turns = self._want
        need = episodes
        if turns is not None and self._finished_episodes:
            pool = [ep for group in self._ready for ep in group]
            lacking = turns - sum(len(ep.turns) for ep in pool if ep.error is None)
            mean = self._finished_turns / self._finished_episodes
            need = max(need, len(pool) + max(0, math.ceil(lacking / max(mean, 1e-9))))
        ahead = need * (1 + self.max_staleness) if self.max_staleness is not None else float("inf")
        self._budget = int(min(ahead, 10**9))

    def close(self) -> None:
        """Stop every episode in flight (their envs are closed) and the loop."""
        if self.loop.is_closed():
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()
            self.loop.run_until_complete(asyncio.gather(self._task, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def __enter__(self) -> EpisodeStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # inside the loop

    def _seeds(self) -> Iterator[int]:
        group = self.first_group
        while True:
            seed = self.seed_of_group(group)
            self.started_groups += 1
            for _ in range(self.group_size):
                yield seed
            group += 1

    def _finished(self, trajectory: Trajectory) -> None:
        group = self.first_group + trajectory.episode // self.group_size
        members = self._partial.setdefault(group, [])
        members.append(to_episode(trajectory, group))
        self._failed_in_row = self._failed_in_row + 1 if trajectory.error else 0
        self._finished_episodes += 1
        self._finished_turns += len(trajectory.turns)
        if len(members) == self.group_size:
            del self._partial[group]
            self._active.discard(group)
            members.sort(key=lambda ep: ep.trajectory.episode)  # type: ignore[union-attr]
            self._ready.append(members)
        self._set_budget()
        assert self._arrived is not None and self._gate is not None
        self._arrived.set()
        self._gate.changed()

    def _enough(self, episodes: list[Episode], want: int, turns: int | None) -> bool:
        if turns is None:
            return len(episodes) >= want
        return sum(len(ep.turns) for ep in episodes if ep.error is None) >= turns

    async def _until(self, episodes: int, turns: int | None) -> None:
        # per take: what the policy measured (its generation time and tokens) is this iteration's
        self.policy.generate_calls = self.policy.generated_tokens = 0
        self.policy.generate_intervals = []
        self._want = (episodes, turns)
        self._set_budget()
        if self._task is None:
            self._gate = _Gate(self.policy, self._may_start)
            self._arrived = asyncio.Event()
            self._task = asyncio.ensure_future(run_episodes(
                self._make_env, self._gate, seeds=self._seeds(), concurrency=self._concurrency,
                max_turns=self._max_turns, on_error="record" if self._limited else "raise",
                on_trajectory=self._finished, **self._limits))
        assert self._gate is not None and self._arrived is not None
        self._gate.open()
        began = last_beat = self.loop.time()
        while not self._enough(ready := [ep for group in self._ready for ep in group], episodes, turns):
            if self._limited and self._failed_in_row >= max(episodes, 1):
                raise RuntimeError(f"the last {self._failed_in_row} episodes all failed, the last with "
                                   f"{self._last_error()}")
            self._arrived.clear()
            waiter = asyncio.ensure_future(self._arrived.wait())
            beat = None if self.heartbeat_s is None else max(0.0, last_beat + self.heartbeat_s - self.loop.time())
            await asyncio.wait({self._task, waiter}, timeout=beat, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if self.heartbeat_s is not None and self.loop.time() - last_beat >= self.heartbeat_s:
                last_beat = self.loop.time()
                show(self._heartbeat(last_beat - began, ready, episodes, turns))
            if self._task.done():
                self._task.result()  # the stream's error (an endless stream ends no other way)
                raise RuntimeError("the episode stream ended")
        await self._gate.close()

    def _heartbeat(self, seconds: float, ready: list[Episode], episodes: int, turns: int | None) -> str:
        """A line on a rollout still under way: what is done, and what the engine is holding."""
        done = (f"{sum(len(ep.turns) for ep in ready if ep.error is None)} of {turns} turns" if turns is not None
                else f"{len(ready)} of {episodes} episodes")
        return (f"[rollout] {seconds:.0f} s: {done} done, {self.policy.requests_in_engine} requests in the "
                f"engine, {self.policy.generated_tokens} tokens returned so far")

    def _last_error(self) -> str | None:
        for group in reversed(self._ready):
            for ep in group:
                if ep.error:
                    return ep.error
        for members in self._partial.values():
            for ep in members:
                if ep.error:
                    return ep.error
        return None
