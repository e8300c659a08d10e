"""QaEnv.audit_answers: gem audit's right and wrong in-format answers for QA envs."""

from __future__ import annotations

import pytest

import gem
from gem.audit import audit_env


@pytest.mark.parametrize("env_id", ["eval:NaturalQuestions", "eval:TriviaQA", "eval:FanOutQA", "qa:SQuAD-search"])
def test_right_answer_scores_one_and_wrong_answer_scores_zero_in_format(env_id):
    """The audit's baseline must be wrong but in format, and its right answer must be right, on every
    question (multi-part FanOutQA answers included), bare or behind the search tool."""
    env = gem.make(env_id)
    for seed in range(12):
        env.reset(seed=seed)
        right, wrong = env.audit_answers()
        assert right is not None and wrong is not None
        state = env.get_state()
        _, reward, terminated, _, info = env.step(right)
        assert (reward, terminated, info["correct"]) == (1.0, True, True), (seed, right, info)
        env.set_state(state)
        _, reward, _, _, info = env.step(wrong)
        assert reward == 0.0 and info["format_error"] is False and not info["correct"], (seed, wrong, info)


def test_audit_of_a_qa_env_uses_the_wrong_answer_baseline():
    """Before audit_answers the QA baseline was random (baseline_name "random answer", right unknown): no
    strategy could be called severe."""
    result = audit_env("eval:TriviaQA", episodes=8)
    assert result.baseline_name == "wrong answer" and result.baseline_mean == 0.0
    assert result.right_mean == 1.0 and result.flagged == []
