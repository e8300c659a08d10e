"""MathEnv: rewards, evaluation order, epochs, state, spawn, and every registered id."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import gem
from gem.errors import DataUnavailableError
from gem.testing import check_env
from gem_envs_math.env import TERMINAL_STATE, MathEnv
from gem_envs_math.plugin import HUB_IDS, OFFLINE_IDS


def test_rewards_and_info() -> None:
    env = gem.make("eval:MATH500")
    question, info = env.reset(idx=0)
    assert question.startswith("Convert the point $(0,3)$") and info["idx"] == 0
    obs, reward, terminated, truncated, info = env.step(r"... so $\boxed{(3, \frac{\pi}{2})}$.")
    assert (obs, reward, terminated, truncated, info["correct"]) == (TERMINAL_STATE, 1.0, True, True, True)
    assert info["format_error"] is False
    env.reset(idx=0)
    assert env.step(r"\boxed{(3, \pi)}")[1:3] == (0.0, True)
    env.reset(idx=0)
    _, reward, _, _, info = env.step("I think it is (3, pi/2)")
    assert (reward, info["format_error"], info["correct"]) == (0.0, True, False)


def test_format_error_reward() -> None:
    env = gem.make("eval:GSM8K", format_error_reward=-0.1)
    env.reset(idx=0)
    assert env.step("eighteen")[1] == -0.1
    env.reset(idx=0)
    assert env.step("Janet makes 9 * 2 = 18.\n#### 18")[1] == 1.0


def test_eval_order_is_deterministic_and_epochs_are_shuffled() -> None:
    env = gem.make("eval:MATH-L1")
    n = len(env.records)
    assert [env.reset(idx=i)[1]["idx"] for i in range(5)] == [0, 1, 2, 3, 4]
    env.reset(seed=3)
    epoch = [env.index] + [env.reset()[1]["idx"] for _ in range(n - 1)]
    assert sorted(epoch) == list(range(n)) and epoch != sorted(epoch)
    next_epoch = [env.reset()[1]["idx"] for _ in range(n)]
    assert sorted(next_epoch) == list(range(n)) and next_epoch != epoch
    with pytest.raises(IndexError):
        env.reset(idx=n)


def test_unshuffled_order() -> None:
    env = gem.make("eval:MATH500", shuffle=False)
    assert [env.reset(seed=s)[1]["idx"] for s in (1, 2)] == [0, 0]
    assert [env.reset()[1]["idx"] for _ in range(3)] == [1, 2, 3]


def test_seeded_streams_are_per_env() -> None:
    a, b = gem.make("eval:GSM8K"), gem.make("eval:GSM8K")
    a.reset(seed=7)
    b.reset(seed=7)
    assert [a.reset()[0] for _ in range(5)] == [b.reset()[0] for _ in range(5)]


def test_state_round_trip_and_spawn_share_the_data() -> None:
    env = gem.make("math:MATHTest4.5K")
    env.reset(seed=1)
    env.reset()
    state = json.loads(json.dumps(env.get_state()))
    expected = [env.reset()[0] for _ in range(3)]
    env.set_state(state)
    assert [env.reset()[0] for _ in range(3)] == expected
    twin = env.spawn()
    assert twin.records is env.records  # one copy of the data, not two
    assert gem.make("math:MATHTest4.5K").records is env.records
    clone = env.spawn(same_state=True)
    assert clone.reset()[0] == env.reset()[0]


def test_in_memory_dataset_keeps_its_keys() -> None:
    rows = [{"q": "1+1?", "a": "2"}, {"q": "2+3?", "a": ["5", "five"]}]
    env = MathEnv(dataset=rows, question_key="q", answer_key="a")
    assert env.reset(idx=1)[0] == "2+3?"
    assert env.step(r"\boxed{5}")[1] == 1.0
    assert env.spawn().records is rows


def test_local_file_source(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "What is 6*7?", "final": "42"}) + "\n")
    env = gem.make("math:GSM8K", path=str(path), question_key="question", answer_key="final")
    assert env.reset()[0] == "What is 6*7?"
    assert env.step(r"\boxed{42}")[1] == 1.0


@pytest.mark.parametrize("env_id", sorted(HUB_IDS))
def test_hub_only_ids_fail_at_make_with_instructions(env_id: str) -> None:
    dataset_name, _split = HUB_IDS[env_id]
    with pytest.raises(DataUnavailableError) as caught:
        gem.make(env_id)
    message = str(caught.value)
    assert dataset_name in message and "source=" in message and "pip install datasets" in message


def test_every_reference_math_id_is_registered() -> None:
    reference = {
        "math:GSM8K", "math:Math12K", "math:Math8K-3to5", "math:ASDiv2K", "math:Orz57K", "math:DeepScaleR40K",
        "eval:MATH500", "eval:AMC", "eval:AIME24", "eval:OlympiadBench", "eval:Minerva",
    }  # fmt: skip
    assert reference <= set(gem.list_envs())


# full check on a few ids, a lighter one (fewer random strings) on the rest
FULL_CHECK = {"eval:MATH500", "math:ASDiv2K", "eval:GSM8K"}


@pytest.mark.parametrize("env_id", sorted(OFFLINE_IDS))
def test_check_env_on_every_offline_id(env_id: str) -> None:
    env = gem.make(env_id)
    check_env(env, num_random_strings=200 if env_id in FULL_CHECK else 10)
    env.reset(idx=0)
    assert env.step(rf"\boxed{{{env.answer}}}")[1] == 1.0  # the reference answer scores


def test_vector_env_thread_backend() -> None:
    envs = gem.make_vec(["eval:MATH500"] * 4, backend="thread", seed=0)
    try:
        envs.reset()
        answers = [rf"\boxed{{{e.answer}}}" for e in _sub_envs(envs)]
        _obs, rewards, terminated, _truncated, _infos = envs.step(answers)
        assert list(rewards) == [1.0] * 4 and all(terminated)
    finally:
        envs.close()


def _sub_envs(envs):  # the unwrapped sub-envs of a local vector env
    return [e.unwrapped for e in envs.envs]


def test_async_steps_run_concurrently() -> None:
    async def main() -> list[float]:
        envs = [gem.make("eval:GSM8K") for _ in range(8)]
        await asyncio.gather(*(e.areset(idx=i) for i, e in enumerate(envs)))
        steps = await asyncio.gather(*(e.astep(rf"#### {e.answer}") for e in envs))
        return [s[1] for s in steps]

    assert asyncio.run(main()) == [1.0] * 8


def test_a_hostile_answer_costs_one_timeout_then_grading_goes_on() -> None:
    env = gem.make("eval:GSM8K", grade_timeout=1.0)
    env.reset(idx=0)  # a numeric answer (18): comparing it with a power tower evaluates the tower
    _, reward, terminated, _, info = env.step(r"\boxed{9^{9^{9^9}}}")
    assert (reward, terminated, info["grade_status"], info["correct"]) == (0.0, True, "timeout", False)
    env.reset(idx=0)
    assert env.step(rf"\boxed{{{env.answer}}}")[1] == 1.0


def test_async_runner_with_an_oracle_policy() -> None:
    from gem_envs_math import sources

    answers = {r["problem"]: r["answer"] for r in sources.load_packaged("gsm8k-test")}

    async def oracle(observation: str) -> str:
        return f"The answer is \\boxed{{{answers[observation]}}}."

    trajectories = gem.runner.run("eval:GSM8K", oracle, seeds=range(12), concurrency=6)
    assert [t.total_return for t in trajectories] == [1.0] * 12
    assert all(t.done and t.error is None for t in trajectories)
