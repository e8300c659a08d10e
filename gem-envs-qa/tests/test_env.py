"""QaEnv: rewards, extraction modes, multi-part answers, order, state, and every id."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import gem
from gem.errors import DataUnavailableError
from gem.testing import check_env
from gem_envs_qa.env import PROMPT_TEMPLATE, TERMINAL_STATE, QaEnv
from gem_envs_qa.plugin import HUB_IDS, OFFLINE_IDS


def test_prompt_and_rewards() -> None:
    env = gem.make("eval:TriviaQA")
    obs, info = env.reset(idx=0)
    assert obs == PROMPT_TEMPLATE.format(question=env.question) and info["idx"] == 0
    assert "<think>" in obs and "<answer>" in obs and obs.endswith("December 1993?\n")
    out = env.step("<think>Lloyd Webber, 1993...</think> <answer>the Sunset Blvd.</answer>")
    obs, reward, terminated, truncated, info = out
    # the episode ends with both flags set, as the reference's single-turn envs end
    assert (obs, reward, terminated, truncated) == (TERMINAL_STATE, 1.0, True, True)
    assert info["correct"] is True and info["f1"] == 1.0 and info["extracted_answer"] == "the Sunset Blvd."
    env.reset(idx=0)
    _, reward, _, _, info = env.step("<answer>Sunset</answer>")
    assert (reward, info["correct"], info["format_error"]) == (0.0, False, False)
    assert info["f1"] == pytest.approx(2 / 3)  # one of "sunset boulevard"'s two tokens
    env.reset(idx=0)
    _, reward, terminated, _, info = env.step("Sunset Boulevard, surely")  # no tag: a format error
    assert (reward, terminated, info["format_error"], info["correct"], info["f1"]) == (0.0, True, True, False, 0.0)


def test_format_error_reward_and_boxed_mode() -> None:
    env = gem.make("eval:QaOpen", format_error_reward=-0.1)
    env.reset(idx=0)
    assert env.step("December 1972")[1] == -0.1
    boxed = gem.make("eval:QaOpen", extract_boxed=True)
    obs, _ = boxed.reset(idx=0)
    assert "\\boxed{your answer here}" in obs
    assert boxed.step(r"so \boxed{December 1972}")[1] == 1.0
    boxed.reset(idx=0)
    assert boxed.step("<answer>December 1972</answer>")[1] == 0.0  # tags are not read in boxed mode


def test_multi_part_answers_need_every_part() -> None:
    env = gem.make("eval:FanOutQA")
    env.reset(idx=0)  # the batting hands of the first five 1998 MLB draft picks: Right, Left
    _, reward, _, _, info = env.step("<answer>Burrell right, Mulder left, Patterson left</answer>")
    assert (reward, info["part_recall"]) == (1.0, 1.0)
    env.reset(idx=0)
    _, reward, _, _, info = env.step("<answer>all of them bat right</answer>")
    assert (reward, info["part_recall"]) == (0.0, 0.5)


def test_reference_style_answers_score() -> None:
    # every gold alias of every offline dataset earns the reward when stated in a tag
    for env_id in OFFLINE_IDS:
        env = gem.make(env_id)
        for i in range(0, len(env.records), max(1, len(env.records) // 25)):
            env.reset(idx=i)
            record = env.records[i]
            response = ", ".join(record.get("answer_parts") or record["answer"][:1])
            assert env.step(f"<answer>{response}</answer>")[1] == 1.0, (env_id, i, record)


def test_eval_order_is_deterministic_and_epochs_are_shuffled() -> None:
    env = QaEnv(dataset=[{"question": f"q{i}", "answer": str(i)} for i in range(30)])
    assert [env.reset(idx=i)[1]["idx"] for i in range(3)] == [0, 1, 2]
    env.reset(seed=3)
    epoch = [env.index] + [env.reset()[1]["idx"] for _ in range(29)]
    assert sorted(epoch) == list(range(30)) and epoch != sorted(epoch)
    next_epoch = [env.reset()[1]["idx"] for _ in range(30)]
    assert sorted(next_epoch) == list(range(30)) and next_epoch != epoch
    with pytest.raises(IndexError):
        env.reset(idx=30)
    ordered = QaEnv(dataset=[{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}], shuffle=False)
    assert [ordered.reset()[1]["idx"] for _ in range(3)] == [0, 1, 0]


def test_constructor_seed_fixes_the_stream() -> None:
    a, b = gem.make("eval:TriviaQA", seed=5), gem.make("eval:TriviaQA", seed=5)
    assert [a.reset()[0] for _ in range(4)] == [b.reset()[0] for _ in range(4)]


def test_state_round_trip_and_spawn_share_the_data() -> None:
    env = gem.make("eval:NaturalQuestions")
    env.reset(seed=1)
    state = json.loads(json.dumps(env.get_state()))
    expected = [env.reset()[0] for _ in range(3)]
    env.set_state(state)
    assert [env.reset()[0] for _ in range(3)] == expected
    assert env.spawn().records is env.records  # one copy of the data
    assert gem.make("eval:QaOpen").records is env.records


def test_local_file_through_a_registered_id(tmp_path: Path) -> None:
    path = tmp_path / "bamboogle.jsonl"
    path.write_text(json.dumps({"question": "Who wrote Hamlet?", "answer": ["William Shakespeare", "Shakespeare"]}))
    env = gem.make("eval:Bamboogle", source=str(path))  # a hub-only id, given a local copy
    assert "Who wrote Hamlet?" in env.reset()[0]
    assert env.step("<answer>shakespeare</answer>")[1] == 1.0


@pytest.mark.parametrize("env_id", sorted(HUB_IDS))
def test_hub_only_ids_fail_at_make_with_instructions(env_id: str) -> None:
    dataset_name, split, _ = HUB_IDS[env_id]
    with pytest.raises(DataUnavailableError) as caught:
        gem.make(env_id)
    message = str(caught.value)
    assert dataset_name in message and repr(split) in message
    assert "source='data.jsonl'" in message and "pip install" in message


def test_every_reference_qa_id_is_registered() -> None:
    reference = {
        "qa:NaturalQuestions", "qa:HotpotQA", "eval:QaOpen", "eval:TriviaQA", "eval:PopQA", "eval:2Wiki",
        "eval:HotpotQA", "eval:Bamboogle", "eval:NaturalQuestions", "eval:Musique",
    }  # fmt: skip
    assert reference <= set(gem.list_envs())


@pytest.mark.parametrize("env_id", sorted(OFFLINE_IDS))
def test_check_env_on_every_offline_id(env_id: str) -> None:
    check_env(gem.make(env_id))
    check_env(gem.make(env_id, extract_boxed=True), num_random_strings=20)


def test_vector_env_and_async() -> None:
    envs = gem.make_vec(["eval:TriviaQA"] * 3, backend="thread", seed=0)
    try:
        envs.reset()
        answers = [f"<answer>{e.unwrapped.answer[0]}</answer>" for e in envs.envs]
        _obs, rewards, terminated, _truncated, _infos = envs.step(answers)
        assert list(rewards) == [1.0] * 3 and all(terminated)
    finally:
        envs.close()

    async def main() -> list[float]:
        pool = [gem.make("eval:QaOpen") for _ in range(4)]
        await asyncio.gather(*(e.areset(idx=i) for i, e in enumerate(pool)))
        return [s[1] for s in await asyncio.gather(*(e.astep(f"<answer>{e.answer[-1]}</answer>") for e in pool))]

    assert asyncio.run(main()) == [1.0] * 4
