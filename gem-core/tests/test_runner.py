import asyncio
import threading
import time

import pytest

import gem
from gem.runner import run, run_episodes
from gem.testing.envs import BarrierEnv, CountEnv


def binary_search_policy():
    """A policy that plays CountEnv by binary search on its hints (per episode state)."""

    bounds: dict[int, list[int]] = {}

    async def act(observation: str) -> str:
        key = id(asyncio.current_task())
        lo, hi, last = bounds.setdefault(key, [1, 100, 0])  # each episode runs in its own task
        if "higher" in observation:
            lo = last + 1
        elif "lower" in observation:
            hi = last - 1
        guess = (lo + hi) // 2
        bounds[key] = [lo, hi, guess]
        return f"\\boxed{{{guess}}}"

    return act


def test_trajectories_hold_every_turn(count_registry):
    trajs = run("test:Count-v0-hard", binary_search_policy(), seeds=range(6), concurrency=3)
    assert [t.seed for t in trajs] == list(range(6))
    for t in trajs:
        assert t.done and t.total_return == 1.0 and t.error is None
        assert t.turns[-1].terminated and t.turns[-1].info["correct"]
        assert t.turns[0].observation.startswith("Guess a number between 1 and 100")
        assert all(turn.action.startswith("\\boxed{") for turn in t.turns)


def test_seeds_make_runs_reproducible(count_registry):
    async def random_policy(obs):
        return "\\boxed{7}"

    first = run("test:Count-v0-hard", random_policy, seeds=[1, 2, 3])
    second = run("test:Count-v0-hard", random_policy, seeds=[1, 2, 3])
    assert [[t.observation for t in tr.turns] for tr in first] == [[t.observation for t in tr.turns] for tr in second]


def test_a_slow_episode_does_not_hold_back_the_others():
    finished: list[int] = []
    others_done = asyncio.Event()

    async def act(observation):
        # episode 0's policy waits on its first turn until every other episode has ended: with a
        # lockstep barrier between episodes they never would, and the wait gives up
        if "slow" in observation:
            await asyncio.wait_for(others_done.wait(), 60)
        return "\\boxed{0}"

    class Tagged(CountEnv):
        def reset(self, seed=None, **kwargs):
            obs, info = super().reset(seed)
            return (obs + " slow" if seed == 0 else obs), info

        def step(self, action):
            obs, r, term, trunc, info = super().step(action)
            return (obs + " slow" if self._seed_tag == 0 else obs), r, term, trunc, info

        def areset(self, seed=None, **kwargs):
            self._seed_tag = seed
            return super().areset(seed, **kwargs)

    def record(traj):
        finished.append(traj.seed)
        if len(finished) == 4:
            others_done.set()

    trajs = run(lambda: Tagged(max_turns=4), act, seeds=range(5), concurrency=5, on_trajectory=record)
    assert all(len(t) == 4 and t.error is None for t in trajs)
    assert finished[-1] == 0, "the slow episode should finish last"


def test_policy_errors_are_recorded_or_raised(count_registry):
    async def flaky(obs):
        raise ConnectionError("endpoint down")

    trajs = run("test:Count-v0", flaky, seeds=[0, 1], on_error="record")
    assert all(t.error == "ConnectionError: endpoint down" for t in trajs)
    with pytest.raises(ConnectionError):
        run("test:Count-v0", flaky, seeds=[0])


def test_max_turns_truncates_and_wrappers_apply(count_registry):
    async def wrong(obs):
        return "\\boxed{0}"

    trajs = run("test:Count-v0-hard", wrong, seeds=[0], max_turns=2, wrappers="concat_with_action")
    assert len(trajs[0]) == 2 and trajs[0].turns[-1].truncated
    assert "\\boxed{0}" in trajs[0].turns[1].observation  # the history wrapper's view


def test_an_env_instance_is_spawned_per_concurrent_episode(count_registry):
    env = gem.make("test:Count-v0")

    def sync_policy(obs):  # plain functions work too
        return "\\boxed{1}"

    trajs = asyncio.run(run_episodes(env, sync_policy, num_episodes=4, concurrency=2))
    assert len(trajs) == 4 and all(t.env_id == "test:Count-v0" for t in trajs)


def test_policies_that_take_a_context_learn_their_episode(count_registry):
    seen = []

    async def act(observation, context):
        seen.append((context.index, context.seed, context.turn, context.env_id))
        return "\\boxed{0}"

    run("test:Count-v0", act, seeds=[5, 6], max_turns=2)
    assert sorted(seen) == [(0, 5, 0, "test:Count-v0"), (0, 5, 1, "test:Count-v0"),
                            (1, 6, 0, "test:Count-v0"), (1, 6, 1, "test:Count-v0")]


def test_an_env_that_fails_to_build_is_recorded_not_raised():
    def broken_factory():
        raise OSError("dataset missing")

    async def act(observation):
        return "x"

    trajs = run(broken_factory, act, seeds=[0, 1], on_error="record")
    assert [t.error for t in trajs] == ["OSError: dataset missing"] * 2


def test_policy_info_is_kept_per_turn(count_registry):
    async def act(observation, context):
        return "\\boxed{0}", {"turn": context.turn, "token_ids": [1, 2, 3]}

    trajs = run("test:Count-v0", act, seeds=[0], max_turns=2)
    assert [t.policy_info["turn"] for t in trajs[0].turns] == [0, 1]
    assert all(t.action == "\\boxed{0}" for t in trajs[0].turns)


def test_wrappers_that_need_a_tokenizer_get_it(count_registry):
    class Template:
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            return "|".join(m["content"] for m in messages) + ("|>" if add_generation_prompt else "")

    async def act(observation):
        return "\\boxed{0}"

    trajs = run("test:Count-v0", act, seeds=[0], max_turns=1, wrappers="concat_chat", tokenizer=Template())
    assert trajs[0].turns[0].observation.endswith("|>")


def test_64_concurrent_sync_envs_all_step_at_once():
    # the loop's default executor has min(32, cores + 4) threads: with it, 64 steps are never in
    # flight together and the barrier breaks at its timeout
    barrier = threading.Barrier(64, timeout=60)

    async def act(observation):
        return "\\boxed{0}"

    trajs = run(lambda: BarrierEnv(barrier, high=10**6, max_turns=3), act, seeds=range(64), concurrency=64)
    assert all(len(t) == 3 and t.error is None for t in trajs)
    assert not barrier.broken


def test_256_concurrent_sync_envs_all_step_at_once_and_every_result_comes_back():
    # past executor.BUSY calls in flight the loop collects results on a timer instead of being
    # woken: every step must still come back, and the run must still end once fewer remain
    barrier = threading.Barrier(256, timeout=60)

    async def act(observation):
        return "\\boxed{0}"

    async def both():
        crowd = run_episodes(lambda: BarrierEnv(barrier, high=10**6, max_turns=3), act, seeds=range(256),
                             concurrency=256)
        return await asyncio.wait_for(crowd, 120)

    trajs = asyncio.run(both())
    assert all(len(t) == 3 and t.error is None for t in trajs)
    assert not barrier.broken


def test_pool_results_come_back_after_the_timer_stops():
    from gem.executor import BUSY, ThreadPool

    async def main():
        with ThreadPool(BUSY * 2) as pool:
            crowd = [pool.run(time.sleep, 0.001 * (i % 7)) for i in range(BUSY * 2)]
            assert await asyncio.wait_for(asyncio.gather(*crowd), 60) == [None] * (BUSY * 2)
            # fewer calls than BUSY // 2 now: each is woken for again
            for value in range(5):
                assert await asyncio.wait_for(pool.run(lambda v=value: v), 10) == value

    asyncio.run(main())


def test_the_collectors_threshold_is_raised_during_a_run_and_restored(count_registry):
    import gc

    from gem.runner import GC_THRESHOLD

    seen = []

    async def act(observation):
        seen.append(gc.get_threshold()[0])
        return "\\boxed{0}"

    before = gc.get_threshold()
    run("test:Count-v0", act, seeds=range(4), max_turns=2)
    assert min(seen) >= GC_THRESHOLD and gc.get_threshold() == before
    seen.clear()
    run("test:Count-v0", act, seeds=range(2), max_turns=2, gc_threshold=None)
    assert set(seen) == {before[0]}

    async def two_runs():  # the last of two overlapping runs restores the original
        await asyncio.gather(run_episodes("test:Count-v0", act, seeds=range(3), max_turns=2),
                             run_episodes("test:Count-v0", act, seeds=range(5), max_turns=3))

    asyncio.run(two_runs())
    assert gc.get_threshold() == before
    seen.clear()
    gc.set_threshold(0)  # automatic collection off stays off
    try:
        run("test:Count-v0", act, seeds=range(2), max_turns=2)
    finally:
        gc.set_threshold(*before)
    assert set(seen) == {0}


def test_the_runner_leaves_the_default_executor_alone(count_registry):
    names = set()

    class Named(CountEnv):
        def step(self, action):
            names.add(threading.current_thread().name)
            return super().step(action)

    async def act(observation):
        return "\\boxed{0}"

    run(Named, act, seeds=range(4), concurrency=4)
    assert names and all(n.startswith("gem-runner") for n in names)


class HangingEnv(CountEnv):
    """Steps normally, except that a step with the action "hang" blocks until released."""

    release = threading.Event()

    def reset(self, seed=None, **kwargs):
        self.resets = getattr(self, "resets", 0) + 1
        return super().reset(seed, **kwargs)

    def step(self, action):
        if action == "hang":
            self.release.wait(60)
        return super().step(action)


def test_a_step_that_never_returns_times_out_and_the_env_is_replaced():
    built = []

    def factory():
        built.append(HangingEnv(max_turns=2))
        return built[-1]

    async def act(observation, context):
        if context.index == 0:
            return "hang"
        await asyncio.sleep(0.02)  # later episodes outlast the timeout: the stuck env is free to be misused
        return "\\boxed{0}"

    try:
        trajs = run(factory, act, seeds=range(40), concurrency=2, step_timeout=0.3, on_error="record",
                    episode_timeout=30)
    finally:
        HangingEnv.release.set()
    assert trajs[0].error.startswith("StepTimeoutError") and not trajs[0].turns
    assert all(t.error is None and len(t) == 2 for t in trajs[1:])
    assert built[0].resets == 1 and len(built) == 3  # the stuck env was never handed to a later episode
    with pytest.raises(gem.errors.StepTimeoutError):
        HangingEnv.release.clear()
        try:
            run(factory, act, seeds=[0], step_timeout=0.2)
        finally:
            HangingEnv.release.set()


def test_an_async_step_that_never_returns_and_a_slow_episode_time_out():
    class Forever(CountEnv):
        async def astep(self, action):
            await asyncio.Event().wait()

    async def act(observation):
        return "\\boxed{0}"

    trajs = run(Forever, act, seeds=[0, 1], step_timeout=0.2, on_error="record")
    assert all(t.error.startswith("StepTimeoutError") for t in trajs)

    async def slow(observation):
        await asyncio.sleep(0.2)
        return "\\boxed{0}"

    trajs = run(lambda: CountEnv(high=10**6, max_turns=100), slow, seeds=[0], episode_timeout=0.5,
                on_error="record")
    assert trajs[0].error.startswith("EpisodeTimeoutError") and not trajs[0].done


def test_an_error_under_raise_stops_the_other_episodes():
    stepped_after = []

    async def act(observation, context):
        if context.index == 0:
            raise ValueError("policy broke")
        await asyncio.sleep(0.05)
        stepped_after.append(context.index)
        return "\\boxed{0}"

    with pytest.raises(ValueError, match="policy broke"):
        run(lambda: CountEnv(high=10**6, max_turns=1000), act, seeds=range(4), concurrency=4)
    count = len(stepped_after)
    time.sleep(0.2)
    assert len(stepped_after) == count


def test_cpu_bound_envs_can_live_in_worker_processes(count_registry):
    async def act(observation, context):
        return f"\\boxed{{{context.turn + 1}}}"

    in_threads = run("test:Busy-v0", act, seeds=range(6), concurrency=3)
    in_processes = run("test:Busy-v0", act, seeds=range(6), concurrency=3, processes=2)
    assert [[t.observation for t in tr.turns] for tr in in_processes] == \
        [[t.observation for t in tr.turns] for tr in in_threads]
    assert [tr.total_return for tr in in_processes] == [tr.total_return for tr in in_threads]
    assert all(tr.env_id == "test:Busy-v0" for tr in in_processes)




def test_an_iterator_of_seeds_streams_episodes_as_slots_free():
    """seeds as an iterator: episodes start as slots free, each trajectory goes to on_trajectory, an endless
    stream runs until cancelled, and a finite one returns [] once done."""
    import itertools

    seen: list[int] = []
    started: list[int] = []

    def seeds():
        for seed in itertools.count():
            started.append(seed)
            yield seed

    async def act(observation):
        return "\\boxed{5}"

    async def main():
        task = asyncio.ensure_future(gem.runner.run_episodes(
            CountEnv, act, seeds=seeds(), concurrency=3,
            on_trajectory=lambda traj: seen.append(traj.seed)))
        while len(seen) < 7:
            await asyncio.sleep(0.01)
        assert len(started) - len(seen) <= 3  # never more than concurrency in flight
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert sorted(seen)[:7] == list(range(7))
    done: list[int] = []
    assert gem.runner.run(CountEnv, act, seeds=iter(range(5)),
                          on_trajectory=lambda traj: done.append(traj.seed)) == []
    assert sorted(done) == list(range(5))
