"""Continuous batching across iterations (``rollout.carry_over``, :mod:`gem_train.stream`).

The timing tests run the rollout in an event loop with a virtual clock: a stand-in engine whose reply of ``n``
tokens takes ``n`` clock units (as a decode step per token would), and the env's calls made inline, so the
clock moves only by generation and the measured time is exact, not a wall-clock time on a loaded machine.
"""

from __future__ import annotations

import asyncio
import re
import selectors

import pytest
from toy_env import Chatter

from gem.executor import ThreadPool
from gem.wrappers import apply_wrappers
from gem_train.engines.base import Generation, Sampling
from gem_train.metrics_log import read_metrics
from gem_train.model import load_policy
from gem_train.rollout import EnginePolicy, TurnSample, collect
from gem_train.stream import EpisodeStream, effective_tis_cap, staleness_mask
from gem_train.trainer import train

# REPLY[episode seed][turn]: reply lengths (clock units) chosen so that each turn's longest reply is in another
# episode: every episode takes 12 units, while waiting for each turn's longest reply would take 10 + 10 + 10
REPLY = {0: [10, 1, 1], 1: [1, 10, 1], 2: [1, 1, 10], 3: [1, 1, 1]}
LONGEST_EPISODE = max(map(sum, REPLY.values()))
SUM_OF_TURN_MAXIMA = sum(max(lengths[t] for lengths in REPLY.values()) for t in range(3))


class _Jump(selectors.DefaultSelector):
    """A selector that, with nothing to read, moves the clock to the next timer instead of sleeping."""

    now = 0.0

    def select(self, timeout=None):
        ready = super().select(0)
        if ready or timeout is None or timeout <= 0:
            return ready if ready or timeout is not None else super().select(None)
        self.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._jump = _Jump()
        super().__init__(self._jump)

    def time(self) -> float:
        return self._jump.now


class Paced(Chatter):
    """Chatter that tells the policy how long its reply to each turn is (REPLY), so the stand-in engine knows."""

    def reset(self, seed=None, **kwargs):
        self.seed_ = seed
        super().reset(seed)
        return self._ask(), {}

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return (self._ask() if not truncated else observation), reward, terminated, truncated, info

    def _ask(self) -> str:
        return f"reply with {REPLY[self.seed_ % 4][self.turn]} tokens"


class LatencyEngine:
    """Stand-in for vLLM's continuous batching: each request alone, a reply of n tokens taking n clock units."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.finished_at: list[float] = []

    async def agenerate(self, prompt, sampling, seed=None) -> Generation:
        # the last ask (a message list holds the whole conversation)
        n = int(re.findall(r"reply with (\d+) tokens", self.tokenizer.decode(prompt))[-1])
        await asyncio.sleep(n)
        self.finished_at.append(asyncio.get_running_loop().time())
        token = self.tokenizer.convert_tokens_to_ids("a")
        return Generation([token] * n, [-1.0] * n, "length")

    def generate(self, prompts, sampling, seeds=None):
        raise AssertionError("a continuous engine is called one request at a time")

    def load_weights(self, state_dict) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def inline_envs(monkeypatch):
    """The env's calls run on the loop's thread, so only the engine's sleeps move the virtual clock."""

    def run(self, fn, *args, **kwargs):
        future = asyncio.get_running_loop().create_future()
        future.set_result(fn(*args, **kwargs))
        return future

    monkeypatch.setattr(ThreadPool, "run", run)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return load_policy(tiny_model_path)[1]


def _policy(engine, tokenizer) -> EnginePolicy:
    return EnginePolicy(engine, tokenizer, Sampling(temperature=1.0, max_tokens=16, seed=0), max_model_len=512)


def _make_env(tokenizer):
    return lambda: apply_wrappers(Paced(max_turns=3), "messages", tokenizer=tokenizer)


def test_an_iterations_time_is_its_longest_episode_not_the_sum_of_each_turns_longest_reply(
        inline_envs, tokenizer):
    """With a continuous engine every episode runs its own turns: four three-turn episodes whose long replies
    fall on different turns finish in 12 units (the longest episode), not 30 (what a batch per turn takes)."""
    engine = LatencyEngine(tokenizer)

    class Virtual(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self):
            return VirtualLoop()

    asyncio.set_event_loop_policy(Virtual())  # asyncio.run, inside collect, makes its loop through the policy
    try:
        episodes = collect(_make_env(tokenizer), _policy(engine, tokenizer), seeds=[0, 1, 2, 3], concurrency=4)
    finally:
        asyncio.set_event_loop_policy(None)
    assert [len(ep.turns) for ep in episodes] == [3, 3, 3, 3]
    assert max(engine.finished_at) == LONGEST_EPISODE == 12 < SUM_OF_TURN_MAXIMA == 30


def test_the_stream_ends_an_iteration_with_its_longest_episode_and_carries_the_rest_over(inline_envs, tokenizer):
    """The first take returns once its four episodes are done (12 units), not 30; the episodes that started in
    their freed slots are paused mid-way and carry on in the next take under version 1, so their turns carry
    both versions."""
    engine = LatencyEngine(tokenizer)
    with EpisodeStream(_make_env(tokenizer), _policy(engine, tokenizer), seed_of_group=lambda g: g,
                       group_size=1, concurrency=4, max_turns=3, loop=VirtualLoop()) as stream:
        first = stream.take(episodes=4)
        # in the order they finished: seed 3 at 3 units, the others together at 12
        assert first[0].seed == 3 and sorted(ep.seed for ep in first[1:]) == [0, 1, 2]
        # the slot freed first (seed 3's, at 3 units) started seed 4, whose 10-unit first reply ends at 13
        assert 12 <= stream.loop.time() <= 13 < SUM_OF_TURN_MAXIMA
        assert all(t.version == 0 for ep in first for t in ep.turns)
        stream.advance()
        second = stream.take(episodes=4)
        versions = [[t.version for t in ep.turns] for ep in second]
        assert all(v == sorted(v) and set(v) <= {0, 1} for v in versions)
        assert any(v[0] == 0 and v[-1] == 1 for v in versions)  # carried over the update
        assert stream.version == 1 and stream.next_group >= 8


def test_staleness_mask_and_the_truncated_is_default():
    samples = [TurnSample([1], [2], [-0.1], "stop", version=v) for v in (0, 1, 2)]
    assert staleness_mask(samples, 2, 0) == [False, False, True]
    assert staleness_mask(samples, 2, None) == [True, True, True]
    assert effective_tis_cap(None, "reinforce", carry_over=True) == 2.0
    assert effective_tis_cap(None, "ppo_clip", carry_over=True) is None  # its clipped ratio is the correction
    assert effective_tis_cap(3.0, "reinforce", carry_over=True) == 3.0


def test_a_failing_stream_stops_the_take_with_its_error(tokenizer):
    """Without rollout limits an env error stops the stream, and take raises it (not a hang)."""

    class Broken(Paced):
        def step(self, action):
            raise RuntimeError("env broke")

    engine = LatencyEngine(tokenizer)
    with EpisodeStream(Broken, _policy(engine, tokenizer), seed_of_group=lambda g: g, group_size=1,
                       concurrency=2, max_turns=3, loop=VirtualLoop()) as stream:
        with pytest.raises(RuntimeError, match="env broke"):
            stream.take(episodes=2)


def test_train_with_carry_over(tmp_path, gem_registry):
    """gem-train with rollout.carry_over: iterations train on whole episodes from one stream, the record says
    how stale the batch was, and the checkpoint says where a resumed run's stream starts."""
    from test_train import smoke_config

    gem_registry.register("toy:Chatter-v0", "toy_env:Chatter", max_turns=3)
    out = tmp_path / "run"
    train(smoke_config(out, "env.id=toy:Chatter-v0", "env.entry_point=toy_env:Chatter", "trainer.sft.episodes=0",
                       "rollout.carry_over=true", "rollout.max_staleness=0", "trainer.iterations=3"))
    records = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert all("staleness_mean" in r and r["turns_trained"] + r["stale_turns_dropped"] > 0 for r in records)
    assert records[0]["staleness_mean"] == 0.0
    import json

    state = json.loads(next((out / "checkpoints").glob("*/trainer_state.json")).read_text())
    assert state["stream_next_group"] >= 3 * 4


def test_self_play_collects_per_iteration_even_at_a_carried_over_scale():
    """gem's multi-agent runner plays a batch of games at a time: a self-play preset at scale=paper (carry_over
    on) collects per iteration instead of failing."""
    from gem_train.config import TrainConfig, carries_over, validate

    cfg = TrainConfig()
    cfg.rollout.carry_over = True
    assert carries_over(cfg)
    cfg.env.selfplay = True
    validate(cfg)
    assert not carries_over(cfg)


def test_a_rollout_still_under_way_says_so_every_heartbeat(inline_envs, tokenizer, capsys):
    """A long rollout is not silent (a paper-scale first iteration can take minutes): every ``heartbeat_s`` of
    the loop's clock a line says what is done and what the engine holds. Four episodes take 12 units here."""
    engine = LatencyEngine(tokenizer)
    with EpisodeStream(_make_env(tokenizer), _policy(engine, tokenizer), seed_of_group=lambda g: g,
                       group_size=1, concurrency=4, max_turns=3, loop=VirtualLoop(), heartbeat_s=5) as stream:
        stream.take(episodes=4)
    beats = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[rollout]")]
    assert len(beats) == 2, beats
    # seed 3 finished at 3 units and its slot began seed 4: four requests in the engine
    assert beats[0] == "[rollout] 5 s: 1 of 4 episodes done, 4 requests in the engine, 6 tokens returned so far"
    assert beats[1].startswith("[rollout] 10 s: 1 of 4 episodes done")


def _take_within(stream: EpisodeStream, seconds: float, **want):
    """``stream.take(**want)`` in a thread: its episodes, or a failure when it has not returned in time (the
    stream waiting for episodes it no longer begins would otherwise hang the test)."""
    import threading

    taken: list = []
    thread = threading.Thread(target=lambda: taken.append(stream.take(**want)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"take({want}) did not return in {seconds} s"
    return taken[0]


def test_a_take_of_turns_gets_them_from_episodes_shorter_than_the_mean_so_far(inline_envs, tokenizer):
    """A take of ``turns`` whose episodes are shorter than the stream expects still gets its turns. It once
    stopped for good: the stream begins episodes only up to ``1 + max_staleness`` takes' worth, estimated when
    the take began, so 1-turn episodes (the first take, with no mean yet: a 1.7B model with random weights, 32
    episodes and 128 turns a step, waited at 64 turns; or a policy that learnt to finish sooner than its mean)
    filled that budget short of the turns, and nothing more began."""

    class Shortening(Paced):
        def reset(self, seed=None, **kwargs):
            self.max_turns = 3 if seed < 4 else 1  # the first four three turns long, then one turn each
            return super().reset(seed, **kwargs)

    engine = LatencyEngine(tokenizer)
    make_env = lambda: apply_wrappers(Shortening(), "messages", tokenizer=tokenizer)  # noqa: E731
    with EpisodeStream(make_env, _policy(engine, tokenizer), seed_of_group=lambda g: g, group_size=1,
                       concurrency=4, max_turns=3, loop=VirtualLoop(), heartbeat_s=None) as stream:
        first = _take_within(stream, 60, episodes=4)
        assert [len(ep.turns) for ep in first] == [3, 3, 3, 3]
        stream.advance()
        # the mean so far says about 2-3 turns an episode: 12 turns would take 5, the budget 10; they take 12
        second = _take_within(stream, 60, episodes=2, turns=12)
        assert sum(len(ep.turns) for ep in second) >= 12 and all(len(ep.turns) == 1 for ep in second[-8:])
    with EpisodeStream(make_env, _policy(engine, tokenizer), seed_of_group=lambda g: g + 4, group_size=1,
                       concurrency=8, max_turns=3, loop=VirtualLoop(), heartbeat_s=None) as stream:
        # the first take: no mean yet, so 2 episodes' worth times two; 1-turn episodes, 8 turns wanted
        assert sum(len(ep.turns) for ep in _take_within(stream, 60, episodes=2, turns=8)) >= 8
