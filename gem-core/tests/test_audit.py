"""gem audit: generic exploit strategies against real envs, flagged only beyond chance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import gem
from gem.audit import audit_env
from gem.audit.command import main
from gem.audit.stats import t_quantile
from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem.core import Env, StepResult
from gem.errors import DataUnavailableError
from gem.hookspecs import hookimpl
from gem.parsing import last_boxed
from gem.plugins import register_plugin
from gem.testing.envs import CountEnv


class AnyBoxedPays(Env):
    """Pays for an answer *among* the boxed ones: the hack "list every candidate at once" works."""

    reward_range = (-0.1, 1.0)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.target = self.rng.randint(1, 10)
        return "Guess a number from 1 to 10 as \\boxed{N}.", {}

    def step(self, action: str) -> StepResult:
        if last_boxed(action) is None:
            return "", FORMAT_ERROR_REWARD, True, False, {FORMAT_ERROR: True}
        hit = f"\\boxed{{{self.target}}}" in action
        return "", float(hit), True, False, {FORMAT_ERROR: False}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(1, 10)}}}"

    def audit_answers(self) -> tuple[str, str]:
        return f"\\boxed{{{self.target}}}", f"\\boxed{{{self.target % 10 + 1}}}"


class EmptyPaysHalf(AnyBoxedPays):
    """Pays 0.5 for an empty action (a grader that treats "nothing to check" as a partial pass)."""

    def step(self, action: str) -> StepResult:
        if not action:
            return "", 0.5, True, False, {FORMAT_ERROR: False}
        hit = last_boxed(action) == str(self.target)
        return "", float(hit), True, False, {FORMAT_ERROR: False}


class HangsOrRaises(CountEnv):
    """Hangs on long actions and raises on empty ones: the audit must end those episodes. The hang
    ends with its test (``released``): a thread left behind would make later tests' worker
    processes start from a forkserver, which knows no id a test registers."""

    released = threading.Event()

    def step(self, action: str) -> StepResult:
        if len(action) > 50_000:
            HangsOrRaises.released.wait(30)
        if not action:
            raise RuntimeError("boom")
        return super().step(action)


class _Plugin:
    """A real pluggy plugin that registers the hackable env, as a third-party suite would."""

    @hookimpl
    def gem_register_envs(self, registry: Any) -> None:
        registry.register("hack:AnyBoxed-v0", AnyBoxedPays)


def test_plugin_env_that_pays_for_a_listed_answer_is_flagged_severe(gem_registry, capsys, tmp_path):
    """Pins the "every candidate at once" hack: a grader that looks for the answer anywhere in the
    action pays a list of 50 guesses as much as the right answer, so the audit calls it severe."""
    register_plugin(_Plugin(), "hack-plugin")
    out = tmp_path / "audit.json"
    assert main(["hack:AnyBoxed-v0", "--episodes", "16", "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "candidates" in text and "SEVERE" in text and "flagged candidates (severe)" in text
    figures = json.loads(out.read_text())["envs"][0]
    assert figures["baseline_name"] == "wrong answer" and figures["baseline_mean"] == 0.0
    assert figures["right_mean"] == 1.0
    by_name = {s["name"]: s for s in figures["strategies"]}
    assert by_name["candidates"]["severe"] and by_name["repeated"]["flagged"] is False
    assert by_name["empty"]["flagged"] is False


def test_partial_payment_for_the_empty_action_is_flagged_but_not_severe(gem_registry):
    """Pins the "empty answer" hack: 0.5 for nothing beats the wrong-answer baseline (0) but not the
    right answer (1), so it is flagged, not severe."""
    gem.register("hack:EmptyHalf-v0", EmptyPaysHalf)
    result = audit_env("hack:EmptyHalf-v0", episodes=16)
    flagged = {s.name: s for s in result.flagged}
    assert "empty" in flagged and not flagged["empty"].severe
    assert "whitespace" not in flagged


def test_a_documented_finding_is_shown_but_does_not_fail(gem_registry, capsys):
    gem.register("hack:EmptyHalf-v0", EmptyPaysHalf)
    assert main(["hack:EmptyHalf-v0", "--episodes", "8", "--allow", "hack:EmptyHalf-v0/empty"]) == 0
    assert "flagged empty" in capsys.readouterr().out
    assert main(["hack:EmptyHalf-v0", "--episodes", "8", "--allow", "hack:EmptyHalf-v0/long"]) == 1


def test_honest_env_passes(gem_registry, capsys):
    gem.register("honest:Count-v0", CountEnv)
    assert main(["honest:Count-v0", "--episodes", "16"]) == 0
    assert "FLAGGED" not in capsys.readouterr().out


@pytest.mark.parametrize("seed", [0, 1000, 2000])
def test_lucky_hits_against_a_random_baseline_are_not_flagged(gem_registry, seed):
    """A coin-flip env: the random baseline and every guessing strategy hit half the time; which
    seeds they hit differs, so paired gains of +1 occur, and must stay within the bound."""
    gem.register("honest:Coin-v0", CountEnv, high=2, max_turns=1)
    result = audit_env("honest:Coin-v0", episodes=32, seed=seed)
    assert result.baseline_name == "random answer" and result.right_mean is None
    assert result.flagged == []
    assert any(s.gain != 0 for s in result.strategies)  # the strategies did get lucky on other seeds


def test_hanging_and_raising_env_does_not_crash_the_audit(gem_registry):
    gem.register("bad:HangsOrRaises-v0", HangsOrRaises)
    started = time.monotonic()
    HangsOrRaises.released.clear()
    try:
        result = audit_env("bad:HangsOrRaises-v0", episodes=3, step_timeout=0.3)
    finally:
        HangsOrRaises.released.set()
    assert time.monotonic() - started < 20
    by_name = {s.name: s for s in result.strategies}
    assert by_name["empty"].mean == 0.0 and by_name["long"].mean == 0.0  # the failure reward
    assert any("RuntimeError: boom" in e for e in result.errors)
    assert any("no answer within" in e for e in result.errors)


def test_unknown_id_is_reported_not_raised(gem_registry, capsys):
    assert main(["nope:Missing-v0", "--episodes", "2"]) == 2
    assert "could not make the env" in capsys.readouterr().out


class NoData(CountEnv):
    def __init__(self) -> None:
        raise DataUnavailableError("needs a hub dataset")


def test_env_without_its_data_is_skipped_not_failed(gem_registry, capsys):
    gem.register("data:Missing-v0", NoData)
    assert main(["data:Missing-v0", "--episodes", "2"]) == 0
    assert "skipped, its data is not available here" in capsys.readouterr().out


def test_t_quantile_matches_tables():
    assert t_quantile(0.975, 10) == pytest.approx(2.2281, abs=1e-3)
    assert t_quantile(0.99, 1) == pytest.approx(31.8205, abs=1e-2)
    assert t_quantile(0.95, 1000) == pytest.approx(1.6464, abs=1e-3)


def test_gem_audit_console_command_on_a_suite_env():
    """The real `gem audit` entry point, on an installed suite's env."""
    pytest.importorskip("gem_envs_games")
    gem_bin = os.path.join(os.path.dirname(sys.executable), "gem")
    done = subprocess.run([gem_bin, "audit", "game:GuessTheNumber-v0", "--episodes", "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "game:GuessTheNumber-v0" in done.stdout and "candidates" in done.stdout
