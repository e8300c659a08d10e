"""Reference-package scripts on the QA suite: its module paths, the single-turn step's flags
and its exact-match helper."""

from __future__ import annotations

import gem
from gem.envs.qa_env import QaEnv
from gem.utils.constants import TERMINAL_STATE
from gem.utils.qa_em import em_check, normalize_answer


def test_the_reference_path_is_our_qa_env():
    from gem_envs_qa.env import QaEnv as Ours

    assert QaEnv is Ours


def test_a_reference_qa_episode():
    env = gem.make("eval:QaOpen", verbose=True, seed=0)
    twin = gem.make("eval:QaOpen", verbose=True, seed=0)
    obs, info = env.reset()
    assert obs == twin.reset()[0]
    answer = env.answer[0]
    obs, reward, terminated, truncated, info = env.step(f"<think>I know</think> <answer>{answer}</answer>")
    assert (obs, reward, terminated, truncated, info["correct"]) == (TERMINAL_STATE, 1.0, True, True, True)


def test_em_check_as_the_reference_calls_it():
    assert em_check("The Eiffel Tower!", ["eiffel tower", "la tour"])
    assert em_check("Paris", "paris") and not em_check("Rome", ["Paris"])
    assert normalize_answer("The  Answer.") == "answer"


def test_max_turns_passed_to_every_id_is_accepted_with_a_warning():
    # the reference's tool tests call gem.make("qa:NaturalQuestions", max_turns=3, load_from_cache_file=False):
    # its QaEnv swallows unknown arguments; ours accepts them and says it ignores them
    import pytest

    import gem

    with pytest.warns(UserWarning, match="ignores unknown arguments: max_turns"):
        env = gem.make("eval:NaturalQuestions", max_turns=3, load_from_cache_file=False)
    env.reset()
    assert env.step(f"<answer>{env.answer[0]}</answer>")[1:4] == (1.0, True, True)


def test_reference_eval_loop_assigns_the_answer_then_steps():
    # test_qa.evaluate_llm: dataset = env.dataset; obss = dataset["question"]; env.answer = gold; env.step(action)
    import gem

    env = gem.make("eval:NaturalQuestions")
    assert len(env.dataset.select(range(3))["question"]) == 3
    env.answer = "George Washington"
    assert env.step("<answer>george washington</answer>")[1] == 1.0
    env.answer = ["Paris", "City of Light"]
    assert env.step("<answer>Paris</answer>")[1] == 1.0
