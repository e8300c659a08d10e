"""`gem eval` scores a model against a scripted opponent or another model; `gem play` plays you
against the scripted opponent. The model is gem-evals' scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gem
from gem_evals.evaluation import EvalConfig, evaluate
from gem_evals.testing_server import ScriptedServer


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


def test_gem_eval_against_the_scripted_solver(server, tmp_path):
    # the model always answers cell 5: it opens in the centre, then wastes its turns; the solver wins
    result = evaluate(EvalConfig(["multi:TicTacToe-v0"], model="openai:constant:\\boxed{5}", base_url=server.base_url,
                                 episodes=4, output=tmp_path / "out", progress=False))
    [row] = result.summaries
    assert row["rollouts"] == 4 and row["errors"] == 0 and row["successes"] == 0
    records = [json.loads(line) for line in (result.output / "episodes.jsonl").read_text().splitlines()]
    assert all(r["return"] == 0.0 and r["actions"][0] == "\\boxed{5}" for r in records)


def test_gem_eval_against_another_model(server, tmp_path):
    # the opponent model always answers cell 1, the model under test cell 5: after their first moves both waste
    # every turn, and the game runs to its step limit with no winner
    result = evaluate(EvalConfig(
        ["multi:TicTacToe-v0"], model="openai:constant:\\boxed{5}",
        base_url=server.base_url, episodes=2, output=tmp_path / "out", progress=False,
        env_kwargs={"opponent": "model:openai:constant:\\boxed{1}", "opponent_base_url": server.base_url}))
    [row] = result.summaries
    assert row["rollouts"] == 2 and row["errors"] == 0 and row["successes"] == 0
    records = [json.loads(line) for line in (result.output / "episodes.jsonl").read_text().splitlines()]
    # both models were asked: the one under test once per turn, the opponent once per reply
    assert server.answered == sum(r["turns"] for r in records) * 2
    assert all(r["turns"] == 15 for r in records)


def test_model_opponent_moves(server):
    env = gem.make("multi:TicTacToe-v0", opponent="model:openai:constant:\\boxed{1}", opponent_base_url=server.base_url)
    env.reset(seed=0)
    _obs, _r, _t, _tr, info = env.step("\\boxed{5}")
    assert env.game.board == "O...X...." and info["opponent_actions"] == [{"o": "\\boxed{1}"}]


def test_gem_play_against_the_scripted_opponent():
    # X takes 5, 1, 9...: the solver blocks; the transcript shows the opponent's replies and the result
    moves = "5\n1\n3\n4\n8\n:quit\n"
    out = subprocess.run([str(Path(sys.executable).with_name("gem")), "play", "multi:TicTacToe-v0", "--seed", "0"],
                         input=moves, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "O played" in out.stdout and "episode over" in out.stdout
