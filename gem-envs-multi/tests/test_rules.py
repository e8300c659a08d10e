"""The rules of each game, and how strong its scripted players are."""

from __future__ import annotations

import pytest

import gem
from gem.multiagent import OpponentEnv, make_game, run
from gem_envs_multi.tictactoe import best_moves, winner


def _versus(env_id, players, seeds):
    """Returns per agent over ``seeds`` with scripted ``players`` {agent: name}."""
    totals = {}
    for seed in seeds:
        game = make_game(env_id)
        game.reset(seed=seed)
        while not game.done:
            _o, rewards, *_ = game.step({a: game.scripted_action(a, players[a]) for a in game.active_agents})
            for a, r in rewards.items():
                totals.setdefault(a, []).append(r)
    return {a: sum(v) for a, v in totals.items()}


def test_tictactoe_solver_never_loses():
    # solver against solver: always a draw; solver against random: never a loss, from either seat
    assert _versus("multi:TicTacToe-v0", {"x": "solver", "o": "solver"}, range(20)) == {"x": 10.0, "o": 10.0}
    for seat in ("x", "o"):
        for seed in range(40):
            game = make_game("multi:TicTacToe-v0")
            game.reset(seed=seed)
            result = None
            while not game.done:
                _o, rewards, *_ = game.step({a: game.scripted_action(a, "solver" if a == seat else "random")
                                             for a in game.active_agents})
                result = rewards
            assert result[seat] >= 0.5


def test_tictactoe_rules():
    assert winner("XXX......") == "X" and winner("X...X...X") == "X" and winner("XOXOXOOXO") is None
    assert best_moves("XX.OO....", "X") == [2]  # take the win
    env = gem.make("multi:TicTacToe-v0", opponent="random")
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step("\\boxed{5}")
    obs, reward, terminated, *_ = env.step("\\boxed{5}")  # taken: the turn is lost, no error
    assert "not free" in obs and not terminated and reward == 0.0
    obs, reward, terminated, _tr, info = env.step("\\boxed{ten}")
    assert terminated and reward == -0.1 and info["format_error"]


def test_only_a_format_error_sets_the_format_error_flag():
    env = gem.make("multi:TicTacToe-v0", opponent="random")
    env.reset(seed=0)
    assert env.step("\\boxed{5}")[4]["format_error"] is False
    assert env.step("\\boxed{ten}")[4]["format_error"] is True


def test_signalling_heuristics_always_succeed_and_listener_order_is_shuffled():
    assert _versus("multi:Signalling-v0", {"speaker": "heuristic", "listener": "heuristic"}, range(50)) == {
        "speaker": 50.0, "listener": 50.0}
    random_speaker = _versus("multi:Signalling-v0", {"speaker": "random", "listener": "heuristic"}, range(50))
    assert random_speaker["listener"] < 40
    game = make_game("multi:Signalling-v0")
    orders = set()
    for seed in range(10):
        game.reset(seed=seed)
        assert "->" not in game.observe("listener") and "->" in game.observe("speaker")
        orders.add(tuple(game.order))
    assert len(orders) > 1


def test_bargaining_values_are_hidden_and_deals_pay_each_its_own_value():
    game = make_game("multi:Bargaining-v0")
    game.reset(seed=4)
    counts = game.counts
    v0, v1 = game.values["player_0"], game.values["player_1"]
    assert sum(c * v for c, v in zip(counts, v0)) == 10 == sum(c * v for c, v in zip(counts, v1))
    assert f"books {v0[0]}, hats {v0[1]}, balls {v0[2]}" in game.observe("player_0")
    game.step({"player_0": f"\\boxed{{propose {counts[0]} 0 0}}"})
    _o, rewards, terms, *_ = game.step({"player_1": "\\boxed{accept}"})
    assert rewards == {"player_0": v0[0] * counts[0] / 10, "player_1": (v1[1] * counts[1] + v1[2] * counts[2]) / 10}
    assert all(terms.values())


def test_bargaining_heuristic_makes_deals_and_beats_random():
    both = _versus("multi:Bargaining-v0", {"player_0": "heuristic", "player_1": "heuristic"}, range(40))
    assert both["player_0"] / 40 > 0.45 and both["player_1"] / 40 > 0.45
    env = gem.make("multi:Bargaining-v0", opponent="heuristic")
    against_random = []
    for seed in range(40):
        env.reset(seed=seed)
        done, total = False, 0.0
        while not done:
            _o, r, t, tr, _ = env.step(env.sample_random_action())
            total, done = total + r, t or tr
        against_random.append(total)
    assert sum(against_random) / 40 < both["player_0"] / 40


def test_prisoners_dilemma_is_simultaneous_and_scores_per_round():
    game = make_game("multi:PrisonersDilemma-v0")
    game.reset(seed=0)
    assert game.active_agents == ["player_0", "player_1"]
    _o, rewards, *_ = game.step({"player_0": "\\boxed{defect}", "player_1": "\\boxed{cooperate}"})
    assert rewards == {"player_0": 5 / 25, "player_1": 0.0}
    assert _versus("multi:PrisonersDilemma-v0", {"player_0": "tit_for_tat", "player_1": "always_defect"},
                   [0]) == {"player_0": pytest.approx(4 / 25), "player_1": pytest.approx(9 / 25)}
    env = OpponentEnv("gem_envs_multi.prisoners_dilemma:PrisonersDilemma", opponent="tit_for_tat")
    env.reset(seed=0)
    _o, r, *_ = env.step("\\boxed{cooperate}")
    assert r == pytest.approx(3 / 25)


def test_self_play_through_the_runner():
    async def solver_policy(observation, context):
        return "\\boxed{1}"

    games = run("multi:TicTacToe-v0", solver_policy, seeds=range(3))
    for g in games:
        assert set(g.agents) == {"x", "o"} and g.error is None
        assert g.agents["x"].turns[0].observation.startswith("Tic-Tac-Toe. You play X")
        # "\boxed{1}" every turn: X takes 1, every later move wastes a turn until the step limit
        assert g.agents["x"].turns[-1].truncated
