"""The math envs' answers for ``gem audit`` (gem.audit's optional ``audit_answers`` protocol)."""

from __future__ import annotations

import pytest

import gem
from gem.conventions import FORMAT_ERROR
from gem_envs_math.env import audit_answers


@pytest.mark.parametrize("env_id", ["math:Arithmetic-v0-easy", "math:Algebra-v0-hard", "eval:GSM8K", "eval:MATH500"])
def test_audit_answers_are_graded_right_and_wrong(env_id) -> None:
    """Without audit_answers the audit's baseline was a random number (right by luck now and then) and no
    strategy could be called severe; the right answer must grade 1 and the wrong one 0, in format."""
    env = gem.make(env_id)
    for seed in range(6):
        env.reset(seed=seed)
        right, wrong = env.audit_answers()
        assert env.step(right)[1] == 1.0, (right, env.answer)
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(wrong)
        assert reward == 0.0 and info[FORMAT_ERROR] is False


def test_the_wrong_answer_is_never_the_reference() -> None:
    assert audit_answers("-987654321")[1] == "\\boxed{-123456789}"
    assert audit_answers(["3", "three"]) == ("\\boxed{3}", "\\boxed{-987654321}")
