"""Collecting experience: gem's async runner drives the episodes, an engine generates.

:class:`EnginePolicy` is the async policy the runner calls once per turn. It applies
the chat template once per turn and keeps the prompt token ids, the response token ids and
the sampler's logprobs of every turn. With a continuously batching engine (``vllm_async``)
each request goes to the engine at once and comes back when its own response is done; with
the others it batches the requests of all running episodes into one engine call, so
concurrent episodes share a forward pass but wait for the longest response of their batch.

>>> policy = EnginePolicy(engine, tokenizer, Sampling(max_tokens=16), max_model_len=1024)   # doctest: +SKIP
>>> episodes = collect(make_env, policy, seeds=range(8))                                   # doctest: +SKIP
>>> episodes[0].turns[0].response_ids, episodes[0].turns[0].logprobs                       # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gem
from gem.conventions import FORMAT_ERROR
from gem.runner import EpisodeContext, Trajectory, Turn, run_episodes
from gem_train.engines.base import ContinuousEngine, Engine, Generation, Sampling

PROMPT_TOO_LONG = "prompt_too_long"


def is_format_error(turn: Turn) -> bool:
    """The turn ended its episode on a reply the env could not parse: the env's ``info["format_error"]``
    (:data:`gem.conventions.FORMAT_ERROR`). Never read from the reward: a wrong answer may earn what a format
    error does, and an env that does not score format errors has none.

    >>> is_format_error(Turn("obs", "oops", -0.1, True, False, {FORMAT_ERROR: True})), is_format_error(
    ...     Turn("obs", "oops", -0.1, True, False, {}))
    (True, False)
    """
    return bool(turn.info.get(FORMAT_ERROR, False))


def derive_seed(*parts: int) -> int:
    """A 31-bit seed mixed from ``parts`` (e.g. run seed, iteration, episode, turn); unrelated tuples do not collide
    the way sums of multiples can.

    >>> derive_seed(0, 3, 1) == derive_seed(0, 3, 1) != derive_seed(0, 1, 3)
    True
    """
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (2**31 - 1)


@dataclass
class TurnSample:
    """One turn as the learner sees it."""

    prompt_ids: list[int]
    response_ids: list[int]
    # the sampler's logprob of each response token
    logprobs: list[float]
    # stop (eos), length (cut at max_tokens) or prompt_too_long (no response: the env got an empty action)
    finish_reason: str
    reward: float = 0.0
    # the policy version (updates applied) of the weights that sampled it: with rollout.carry_over an episode's
    # turns may come from several versions, and a turn too many versions old is not trained on
    version: int = 0


@dataclass
class Episode:
    """One episode's turns, with what the runner recorded."""

    seed: int | None
    # episodes that share an initial state share a group (GRPO)
    group: int
    turns: list[TurnSample] = field(default_factory=list)
    trajectory: Trajectory | None = None

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.turns]

    @property
    def total_return(self) -> float:
        return float(sum(self.rewards))

    @property
    def success(self) -> bool:
        """The env said ``correct`` at the end, or (for envs that do not) the last reward was positive."""
        if self.trajectory is None or not self.trajectory.turns:
            return False
        last = self.trajectory.turns[-1]
        if "correct" in last.info:
            return bool(last.info["correct"])
        return last.terminated and last.reward > 0

    @property
    def cut_short(self) -> bool:
        """A turn limit ended the episode (its last turn truncated, not terminated): the game was not over, so
        the state after the last turn still has a value (PPO bootstraps from it)."""
        if self.trajectory is None or not self.trajectory.turns:
            return False
        last = self.trajectory.turns[-1]
        return last.truncated and not last.terminated

    @property
    def format_error(self) -> bool:
        """The episode ended on a reply the env could not parse (:func:`is_format_error`)."""
        if self.trajectory is None or not self.trajectory.turns:
            return False
        return is_format_error(self.trajectory.turns[-1])

    @property
    def tool_calls(self) -> int:
        """Turns whose action a tool wrapper ran as a tool call (``info["use_tool"]``, gem-tools' wrappers)."""
        if self.trajectory is None:
            return 0
        return sum(bool(turn.info.get("use_tool")) for turn in self.trajectory.turns)

    @property
    def error(self) -> str | None:
        """Why the episode stopped early (``"StepTimeoutError: ..."``), when a rollout limit let it fail alone."""
        return self.trajectory.error if self.trajectory is not None else None


def encode_prompt(tokenizer: Any, observation: Any, templated: bool) -> list[int]:
    """Token ids of the prompt for one turn, the chat template applied exactly once.

    ``observation``: a message list (``messages`` wrapper), text already rendered with
    the template (``templated``: ``concat_chat`` wrappers), or plain text, which becomes
    one user message.
    """
    if isinstance(observation, list):
        text = tokenizer.apply_chat_template(observation, tokenize=False, add_generation_prompt=True)
    elif templated:
        text = str(observation)
    else:
        text = tokenizer.apply_chat_template([{"role": "user", "content": str(observation)}], tokenize=False,
                                             add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def union_seconds(intervals: Sequence[tuple[float, float]], minus: Sequence[tuple[float, float]] = ()) -> float:
    """Length of the union of ``(start, end)`` intervals, less the part also covered by ``minus``.

    >>> union_seconds([(0, 2), (1, 3), (5, 6)]), union_seconds([(0, 4)], minus=[(1, 2), (3, 5)])
    (4.0, 2.0)
    """
    def merged(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for start, end in sorted(spans):
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end))
            else:
                out.append((start, end))
        return out

    total = 0.0
    others = merged(minus)
    for start, end in merged(intervals):
        covered = sum(max(0.0, min(end, b) - max(start, a)) for a, b in others)
        total += end - start - covered
    return total


class StepClock(gem.Wrapper):
    """Records the wall-clock interval of every ``step`` call in ``intervals`` (the env's own work,
    not the wait for a thread to run it), so a rollout can tell time in envs from time in generation."""

    def __init__(self, env: Any, intervals: list[tuple[float, float]]) -> None:
        super().__init__(env)
        self.intervals = intervals

    def step(self, action: str) -> Any:
        start = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.intervals.append((start, time.perf_counter()))


class EnginePolicy:
    """The runner's policy: template, generate (one request to a :class:`ContinuousEngine`, else batched), decode.

    Each answer goes back to the runner with its :class:`TurnSample` (prompt ids,
    response ids, sampler logprobs) as the turn's ``policy_info``. With a seeded
    ``sampling``, each request's seed is derived from (seed, episode index, turn), so an
    episode draws the same tokens however the requests happen to batch. ``index_offset`` is added to
    the runner's episode index: a rank playing episodes ``offset..`` of a batch draws as one process
    playing all of them would.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        sampling: Sampling,
        max_model_len: int,
        templated: bool = False,
        batch_wait_s: float = 0.002,
    ) -> None:
        self.engine, self.tokenizer, self.sampling = engine, tokenizer, sampling
        self.max_model_len, self.templated, self.batch_wait_s = max_model_len, templated, batch_wait_s
        self._pending: list[tuple[list[int], int | None, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        # engine calls (batches, or single requests to a continuous engine) and their wall-clock intervals
        self.generate_calls = 0
        self.generated_tokens = 0
        self.generate_intervals: list[tuple[float, float]] = []
        self._calls_seeded = 0
        self.index_offset = 0
        #: requests handed to the engine and not yet answered (a rollout's heartbeat shows them)
        self.requests_in_engine = 0

    @property
    def generate_seconds(self) -> float:
        """Wall time in which some generation was under way (requests to a continuous engine overlap)."""
        return union_seconds(self.generate_intervals)

    async def act(self, observation: Any, context: EpisodeContext | None = None) -> tuple[str, dict[str, TurnSample]]:
        prompt = encode_prompt(self.tokenizer, observation, self.templated)
        if len(prompt) + self.sampling.max_tokens > self.max_model_len:
            # GEM's convention: a turn the model cannot answer is an invalid (empty) action
            return "", {"sample": TurnSample(prompt, [], [], PROMPT_TOO_LONG)}
        seed = None
        if self.sampling.seed is not None and context is not None:
            seed = derive_seed(self.sampling.seed, context.index + self.index_offset, context.turn)
        if isinstance(self.engine, ContinuousEngine):
            gen = await self._generate_one(prompt, seed)
        else:
            future = asyncio.get_running_loop().create_future()
            self._pending.append((prompt, seed, future))
            if self._worker is None or self._worker.done():
                self._worker = asyncio.create_task(self._generate_pending())
            gen = await future
        sample = TurnSample(prompt, gen.token_ids, gen.logprobs, gen.finish_reason)
        return self.tokenizer.decode(gen.token_ids, skip_special_tokens=True), {"sample": sample}

    def _fallback_seed(self) -> int | None:
        """A fresh seed for requests without an episode context, so that no two engine calls repeat draws."""
        if self.sampling.seed is None:
            return None
        self._calls_seeded += 1
        return derive_seed(self.sampling.seed, -1, self._calls_seeded - 1)

    def _record(self, start: float, gens: Sequence[Generation]) -> None:
        self.generate_calls += 1
        self.generate_intervals.append((start, time.perf_counter()))
        self.generated_tokens += sum(len(g.token_ids) for g in gens)

    async def _generate_one(self, prompt: list[int], seed: int | None) -> Generation:
        start = time.perf_counter()
        self.requests_in_engine += 1
        try:
            gen = await self.engine.agenerate(prompt, self.sampling,
                                              seed if seed is not None else self._fallback_seed())
        finally:
            self.requests_in_engine -= 1
        self._record(start, [gen])
        return gen

    async def _generate_pending(self) -> None:
        while self._pending:
            # let the other episodes' env steps finish so their requests join this batch
            await asyncio.sleep(self.batch_wait_s)
            batch, self._pending = self._pending, []
            seeds: list[int] | None = None
            fallback = self._fallback_seed()
            if fallback is not None:
                seeds = [s if s is not None else fallback + i for i, (_, s, _) in enumerate(batch)]
            start = time.perf_counter()
            self.requests_in_engine += len(batch)
            try:
                gens = await asyncio.to_thread(self.engine.generate, [p for p, _, _ in batch], self.sampling, seeds)
            except Exception as exc:
                for _, _, fut in batch:
                    fut.set_exception(exc)
                continue
            finally:
                self.requests_in_engine -= len(batch)
            self._record(start, gens)
            for (_, _, fut), gen in zip(batch, gens):
                fut.set_result(gen)


def collect(
    make_env: Callable[[], Any],
    policy: EnginePolicy,
    seeds: Sequence[int],
    groups: Sequence[int] | None = None,
    concurrency: int = 32,
    max_turns: int | None = None,
    *,
    step_timeout: float | None = None,
    episode_timeout: float | None = None,
    processes: int | None = None,
) -> list[Episode]:
    """Play one episode per seed with ``policy``; returns the episodes in seed order.

    ``step_timeout``, ``episode_timeout`` and ``processes`` are gem's runner's (:func:`gem.runner.run_episodes`;
    with ``processes`` the envs live in worker processes, so ``make_env`` must pickle). With any of them an
    episode that fails (a limit, a lost worker, an error) ends alone with :attr:`Episode.error` set and the
    others go on; only when every episode failed is the first error raised. Without them the first error is.
    """
    seeds = list(seeds)
    if not seeds:
        return []
    limited = step_timeout is not None or episode_timeout is not None or processes is not None
    trajectories = asyncio.run(run_episodes(
        make_env, policy, seeds=seeds, concurrency=concurrency, max_turns=max_turns,
        on_error="record" if limited else "raise", step_timeout=step_timeout, episode_timeout=episode_timeout,
        processes=processes,
    ))
    if limited and all(traj.error for traj in trajectories):
        raise RuntimeError(f"every one of {len(trajectories)} episodes failed, the first with "
                           f"{trajectories[0].error}")
    groups = list(groups) if groups is not None else list(range(len(trajectories)))
    return [to_episode(traj, group) for traj, group in zip(trajectories, groups)]


def to_episode(trajectory: Trajectory, group: int) -> Episode:
    """The learner's view of a runner trajectory: each turn's sample with the env's reward."""
    turns = [turn.policy_info["sample"] for turn in trajectory.turns]
    for sample, turn in zip(turns, trajectory.turns):
        sample.reward = turn.reward
    return Episode(trajectory.seed, group, turns, trajectory)
