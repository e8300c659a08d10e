"""Self-play: the learning policy plays both seats of a multi: game and trains with ReBN, end to end on the
tiny model (env.selfplay=true); and the per-seat episodes it learns from."""

from __future__ import annotations

import math
import re
import threading

import pytest
from hydra import compose, initialize_config_module

import gem
from gem_train.cli import to_train_config
from gem_train.metrics_log import read_metrics
from gem_train.rollout import TurnSample
from gem_train.selfplay import collect_selfplay, game_of
from gem_train.trainer import train

pytest.importorskip("gem_envs_multi")


def first_free_cell(observation) -> str:
    """The lowest free cell of the Tic-Tac-Toe board in an observation (text or chat), in \\boxed{}."""
    text = observation[-1]["content"] if isinstance(observation, list) else observation
    board = text.split("Board:")[-1]
    free = min(int(c) for c in re.findall(r"\b([1-9])\b", board))
    return f"\\boxed{{{free}}}"


class FirstFreeDemonstrator:
    """The SFT warm start's demonstrator (env.demonstrator=test_selfplay:FirstFreeDemonstrator)."""

    def __init__(self, env):
        self.env = env

    def reset(self):
        pass

    def act(self, observation):
        return first_free_cell(observation)


class FirstFreeCell:
    """Plays the lowest free cell, answering as the engine policy does: an action and its TurnSample."""

    def __init__(self):
        self.calls = []

    async def act(self, observation, context=None):
        self.calls.append(context)
        return first_free_cell(observation), {"sample": TurnSample([1, 2], [3], [-0.5], "stop")}


def test_each_seat_is_an_episode_of_its_own_turns_and_rewards():
    policy = FirstFreeCell()
    episodes = collect_selfplay(lambda: gem.make("multi:TicTacToe-v0"), policy, seeds=[0, 1], groups=[7, 7])
    # X takes 1, 3, 5, 7 and wins on the diagonal; O takes 2, 4, 6
    assert [len(ep.turns) for ep in episodes] == [4, 3, 4, 3] and all(ep.group == 7 for ep in episodes)
    x, o = episodes[:2]
    assert x.rewards == [0.0, 0.0, 0.0, 1.0] and o.rewards == [0.0, 0.0, 0.0]
    assert x.trajectory.turns[0].observation.startswith("Tic-Tac-Toe. You play X")
    assert o.trajectory.turns[-1].terminated and "O played" not in x.trajectory.turns[0].observation
    # one sampler shared by both seats: every call of a game gets its own turn number, so no two share a draw
    turns = [(c.index, c.turn) for c in policy.calls]
    assert len(set(turns)) == len(turns) == 14
    with pytest.raises(TypeError, match="multi-agent"):
        game_of(gem.make("game:GuessTheNumber-v0-easy"))


released = threading.Event()


def tictactoe_that_hangs_on_request():
    """Tic-Tac-Toe whose game blocks in a step on the action "hang" (until ``released``)."""
    env = gem.make("multi:TicTacToe-v0")
    game = game_of(env)
    step = game.step

    def hanging_step(actions):
        if "hang" in actions.values():
            released.wait(60)
        return step(actions)

    game.step = hanging_step
    return env


def test_a_selfplay_game_past_its_step_timeout_ends_alone_and_is_counted_as_a_fault():
    inner = FirstFreeCell()

    async def act(observation, context):
        if context.index == 0:
            return "hang", {"sample": TurnSample([1], [2], [-0.5], "stop")}
        return await inner.act(observation, context)

    try:
        episodes = collect_selfplay(tictactoe_that_hangs_on_request, act, seeds=[0, 1, 2], step_timeout=0.5)
    finally:
        released.set()
    # the hung game's first move never returned, so no seat moved: one episode without turns stands for it
    hung, *played = episodes
    assert hung.error.startswith("StepTimeoutError") and hung.turns == [] and hung.seed == 0
    assert [ep.error for ep in played] == [None] * 4 and [len(ep.turns) for ep in played] == [4, 3, 4, 3]


def test_selfplay_trains_with_rebn_end_to_end(tmp_path):
    out = tmp_path / "run"
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = compose("config", overrides=[
            "experiment=smoke", "env.id=multi:TicTacToe-v0", "env.selfplay=true", "algo=rebn",
            # a short, noisy warm start gives the tiny model a mix of moves, invalid moves and malformed replies,
            # so the self-play games end differently and ReBN has returns to tell apart
            "env.demonstrator=test_selfplay:FirstFreeDemonstrator", "trainer.sft.episodes=16",
            "trainer.sft.noise=0.3", "trainer.sft.format_noise=0.3", "trainer.sft.epochs=30",
            f"experiment.output_dir={out}",
            "rollout.max_tokens=12",
        ])
    summary = train(to_train_config(cfg))
    records = read_metrics(out / "metrics.jsonl")
    trains = [r for r in records if r["kind"] == "train"]
    assert len(trains) == 2
    for r in trains:
        # 8 games a batch: each gives one episode per seat that moved (X always moves; O when X's move parsed)
        assert 8 <= r["episodes"] <= 16 and r["turns"] >= 1 and r["response_tokens"] >= 1
        assert math.isfinite(r["loss"]) and r["grad_norm"] > 0
    # evaluation plays the id as registered: the model as X against the scripted solver
    evals = [r for r in records if r["kind"] == "eval"]
    assert evals and all(r["env_id"] == "multi:TicTacToe-v0" for r in evals)
    assert summary["last_train"]["iteration"] == 2
