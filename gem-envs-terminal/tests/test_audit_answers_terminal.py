"""TerminalEnv.audit_answers: gem audit plays the solver turn by turn as the right answer."""

from __future__ import annotations

from gem.audit import audit_env


def test_the_right_lane_solves_every_task_and_the_baseline_stays_random():
    """Without it the terminal audit had no right answer ("unknown"), so no finding could be called severe."""
    result = audit_env("terminal:Shell-v0", episodes=6, jobs=6)
    assert result.baseline_name == "random answer"
    assert result.right_mean == 1.0 and result.errors == []
