"""Reference-package scripts on the math suite: its module paths, MathEnv's keywords and
``.dataset``, the single-turn step's flags, its grader helpers and its reasoning-gym test."""

from __future__ import annotations

import pytest

import gem
from gem.envs.math_env import MathEnv
from gem.utils.constants import TERMINAL_STATE
from gem.utils.debug import run_and_print_episode


def test_the_reference_path_is_our_math_env():
    from gem_envs_math.env import MathEnv as Ours

    assert MathEnv is Ours


def test_a_constructor_seed_fixes_the_question_order():
    first = gem.make("eval:MATH500", seed=3, verbose=True)
    second = gem.make("eval:MATH500", seed=3, verbose=True)
    assert [first.reset()[0] for _ in range(3)] == [second.reset()[0] for _ in range(3)]


def test_the_single_step_ends_as_the_reference_envs_do():
    env = gem.make("eval:MATH500")
    env.reset(idx=0)
    obs, reward, terminated, truncated, info = env.step(r"\boxed{(3, \frac{\pi}{2})}")
    assert (obs, reward, terminated, truncated, info["correct"]) == (TERMINAL_STATE, 1.0, True, True, True)


def test_reference_keywords_use_mp_format_error_and_eval():
    env = MathEnv(dataset=[{"problem": "1+1?", "answer": "2"}], use_mp=False, use_format_error_reward=True, eval=True)
    assert env.use_mp is False and env.shuffle is False
    env.reset()
    assert env.step("no answer")[1] == -0.1


def test_the_dataset_can_be_subsampled_the_reference_way():
    env = gem.make("eval:MATH500")
    dataset = env.dataset
    assert len(dataset) == 500
    dataset = dataset.shuffle()
    dataset = dataset.select(range(5))
    env.dataset = dataset
    seen = {env.reset()[1]["idx"] for _ in range(5)}
    assert seen == set(range(5)) and env.epoch == 0
    env.reset()
    assert env.epoch == 1  # the reference's evaluate loop stops on this


def test_the_reference_grader_helpers():
    from gem.utils.math_grader import boxed_reward_fn, extract_answer, grade

    assert grade("\\frac{1}{2}", "0.5") and not grade("3", "0.5")
    assert boxed_reward_fn("so \\boxed{42}", "42") == ({"formatted": True}, 1.0)
    assert boxed_reward_fn("no box", "42") == ({"formatted": False}, 0.0)
    assert extract_answer("a \\boxed{7} b") == "7"


def test_the_reference_reasoning_gym_test(capsys):
    pytest.importorskip("reasoning_gym")
    from gem.envs.reasoning_gym import ReasoningGymEnv

    rg_env = gem.make("rg:leg_counting", seed=10, size=int(1e9))
    assert isinstance(rg_env, ReasoningGymEnv)
    for _ in range(3):
        run_and_print_episode(rg_env, lambda _: "\\boxed{30}")
    num_envs = 4
    rg_vec_env = gem.make_vec(
        ["rg:leg_counting"] * num_envs, vec_kwargs=[{"seed": 42 + i} for i in range(num_envs)], size=int(1e9)
    )
    run_and_print_episode(rg_vec_env, lambda _: ["\\boxed{30}"] * num_envs, ignore_done=True, max_steps=3)
    rg_vec_env.close()
    assert capsys.readouterr().out.count("terminated:  True") == 3


def test_reference_eval_loop_assigns_the_answer_then_steps():
    # test_math.evaluate: env = gem.make("eval:MATH500"); env.answer = dataset["answer"][i]; env.step(action)
    import gem

    env = gem.make("eval:MATH500")
    env.answer = "7"
    assert env.step("so \\boxed{7}")[1] == 1.0
    assert env.step("so \\boxed{8}")[1] == 0.0
