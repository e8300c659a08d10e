"""Collecting experience: gem's async runner drives the episodes, an engine generates.

:class:`EnginePolicy` is the async policy the runner calls once per turn. It applies
the chat template once per turn, keeps the prompt token ids, the response token ids and
the sampler's logprobs of every turn, and batches the requests of all running episodes
into one engine call, so concurrent episodes share a forward pass.

>>> policy = EnginePolicy(engine, tokenizer, Sampling(max_tokens=16), max_model_len=1024)   # doctest: +SKIP
>>> episodes = collect(make_env, policy, seeds=range(8))                                   # doctest: +SKIP
>>> episodes[0].turns[0].response_ids, episodes[0].turns[0].logprobs                       # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gem.runner import Trajectory, run_episodes
from gem_train.engines.base import Engine, Sampling

PROMPT_TOO_LONG = "prompt_too_long"


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


class EnginePolicy:
    """The runner's policy: template, batch, generate, decode.

    Each answer goes back to the runner with its :class:`TurnSample` (prompt ids,
    response ids, sampler logprobs) as the turn's ``policy_info``.
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
        self._pending: list[tuple[list[int], asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self.generate_calls = 0
        self.generate_seconds = 0.0
        self._calls_seeded = 0

    async def act(self, observation: Any) -> tuple[str, dict[str, TurnSample]]:
        prompt = encode_prompt(self.tokenizer, observation, self.templated)
        if len(prompt) + self.sampling.max_tokens > self.max_model_len:
            # GEM's convention: a turn the model cannot answer is an invalid (empty) action
            return "", {"sample": TurnSample(prompt, [], [], PROMPT_TOO_LONG)}
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._generate_pending())
        gen = await future
        sample = TurnSample(prompt, gen.token_ids, gen.logprobs, gen.finish_reason)
        return self.tokenizer.decode(gen.token_ids, skip_special_tokens=True), {"sample": sample}

    async def _generate_pending(self) -> None:
        while self._pending:
            # let the other episodes' env steps finish so their requests join this batch
            await asyncio.sleep(self.batch_wait_s)
            batch, self._pending = self._pending, []
            sampling = self.sampling
            if sampling.seed is not None:
                # a fresh seed per call, so no two calls repeat the same draws
                sampling = Sampling(sampling.temperature, sampling.top_p, sampling.max_tokens,
                                    sampling.seed + 100_003 * self._calls_seeded)
                self._calls_seeded += 1
            start = time.perf_counter()
            try:
                gens = await asyncio.to_thread(self.engine.generate, [p for p, _ in batch], sampling)
            except Exception as exc:
                for _, fut in batch:
                    fut.set_exception(exc)
                continue
            self.generate_calls += 1
            self.generate_seconds += time.perf_counter() - start
            for (_, fut), gen in zip(batch, gens):
                fut.set_result(gen)


def collect(
    make_env: Callable[[], Any],
    policy: EnginePolicy,
    seeds: Sequence[int],
    groups: Sequence[int] | None = None,
    concurrency: int = 32,
    max_turns: int | None = None,
) -> list[Episode]:
    """Play one episode per seed with ``policy``; returns the episodes in seed order."""
    trajectories = asyncio.run(run_episodes(
        make_env, policy, seeds=list(seeds), concurrency=concurrency, max_turns=max_turns,
    ))
    groups = list(groups) if groups is not None else list(range(len(trajectories)))
    episodes = []
    for traj, group in zip(trajectories, groups):
        turns = [turn.policy_info["sample"] for turn in traj.turns]
        for sample, turn in zip(turns, traj.turns):
            sample.reward = turn.reward
        episodes.append(Episode(traj.seed, group, turns, traj))
    return episodes
