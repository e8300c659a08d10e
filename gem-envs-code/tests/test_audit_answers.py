"""The code envs' answers for ``gem audit`` (gem.audit's optional ``audit_answers`` protocol)."""

from __future__ import annotations

import pytest

import gem
from gem.conventions import FORMAT_ERROR


@pytest.mark.parametrize("env_id", ["code:MBPP", "code:HumanEval"])
def test_audit_baseline_is_an_in_format_wrong_answer_and_right_is_the_reference(env_id) -> None:
    """Pins the audit's false alarm on code:MBPP: its baseline was sample_random_action(), out of format
    a third of the time (-0.1), so empty-handed in-format programs (sys.exit(0), printing "OK") "gained"
    +0.034 over it and were flagged. The baseline must be an in-format program that fails (0, no format
    error), and the right answer the data's reference solution (1)."""
    env = gem.make(env_id)
    for seed in range(4):
        env.reset(seed=seed)
        right, wrong = env.audit_answers()
        _, reward, _, _, info = env.step(wrong)
        assert reward == 0.0 and info[FORMAT_ERROR] is False
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(right)
        assert reward == 1.0 and info["correct"], info
