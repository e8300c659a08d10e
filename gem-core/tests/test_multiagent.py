"""The multi-agent API: the reference package's MultiAgentEnv/AgentSelector behaviour, our
state/seeding on top, the single-agent view against opponents and the multi-agent runner."""

from __future__ import annotations

import json

import pytest

from gem.multiagent import AgentSelector, MultiAgentEnv, OpponentEnv, run
from gem.testing import check_env


class Counter(MultiAgentEnv):
    """Each agent says words; "good" earns 1, "bad" -1, "exit" leaves; 10 steps truncate."""

    default_opponent = "random"

    def __init__(self, mode: str = "sequential", num_agents: int = 3, max_steps: int = 10) -> None:
        super().__init__()
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agent_selector = AgentSelector(self.possible_agents, mode=mode)
        self.step_count, self.max_steps = 0, max_steps

    def reset(self, seed=None, **kwargs):
        self.step_count = 0
        return super().reset(seed)

    def observe(self, agent):
        return f"Step {self.step_count}: Observation for {agent}"

    def _process_actions(self, actions):
        rewards = {}
        for agent, action in actions.items():
            rewards[agent] = 1.0 if "good" in action else -1.0 if "bad" in action else 0.0
            if action == "exit":
                self.terminations[agent] = True
        self.step_count += 1
        if self.step_count >= self.max_steps:
            for agent in self.agents:
                self.truncations[agent] = True
        return {a: self.observe(a) for a in actions}, rewards, self.terminations, self.truncations, {}

    def sample_random_action(self, agent=None):
        return self.rng.choice(["good", "bad", "meh", "exit"])

    def game_state(self):
        return {"step_count": self.step_count}

    def load_game_state(self, state):
        self.step_count = state["step_count"]


def test_sequential_turns_and_cumulative_rewards():
    env = Counter()
    env.reset(seed=0)
    order = []
    for action in ["good", "bad", "meh", "good"]:
        (agent,) = env.active_agents
        order.append(agent)
        env.step({agent: action})
    assert order == ["agent_0", "agent_1", "agent_2", "agent_0"]
    assert [env.get_state(a)[1] for a in env.agents] == [2.0, -1.0, 0.0]
    assert len(env.get_active_states()) == 1 and "agent_1" in env.get_active_states()


def test_parallel_mode_and_dead_agent_removal():
    env = Counter(mode="parallel")
    env.reset()
    assert len(env.get_active_states()) == 3
    _obs, _rew, term, _trunc, _info = env.step({"agent_0": "x", "agent_1": "exit", "agent_2": "x"})
    # the finished agent is still in the returned dict (the reference lost it) but gone from the env
    assert term["agent_1"] is True and "agent_1" not in env.agents
    while env.agents:
        env.step({a: "x" for a in env.active_agents})
    assert env.agents == [] and env.done


def test_validation_errors():
    env = Counter()
    env.reset()
    with pytest.raises(ValueError, match="Missing action"):
        env.step({})
    with pytest.raises(ValueError, match="not active"):
        env.step({"agent_0": "x", "agent_1": "x"})
    with pytest.raises(ValueError, match="must be a dict"):
        env.step("not a dict")
    with pytest.raises(ValueError, match="not in environment"):
        env.get_state("agent_999")
    env.step({"agent_0": "valid"})


def test_selector():
    selector = AgentSelector(["a1", "a2", "a3", "a4"])
    for _ in range(4):
        selector.next()
    assert selector.is_first() and selector.selected == "a1"
    selector.reinit(["x1", "x2"])
    selector.next()
    assert selector.is_last()
    selector.add_agent("x3")
    selector.remove_agent("x1")
    assert selector.selected == "x2"
    selector.remove_agent("x2")
    selector.remove_agent("x3")
    assert selector.selected is None and selector.get_active_agents() == []
    with pytest.raises(ValueError, match="Unknown mode"):
        AgentSelector(["a"], mode="unknown").get_active_agents()


def test_agents_and_messages():
    env = Counter()
    env.reset()
    env.add_agent("agent_3")
    assert "agent_3" in env.agents
    env.remove_agent("agent_3")
    env.send_message("agent_0", "agent_1", "Hello!")
    env.broadcast_message("agent_0", "Hi all")
    assert len(env.shared_memory) == 3
    for bad in (lambda: env.send_message("agent_0", "nobody", "x"), lambda: env.send_message("nobody", "agent_0", "x"),
                lambda: env.broadcast_message("nobody", "x")):
        with pytest.raises(ValueError):
            bad()


def test_state_round_trip_through_json_and_seeded_replay():
    env = Counter(mode="sequential")
    env.reset(seed=3)
    env.step({"agent_0": "good"})
    state = json.loads(json.dumps(env.get_state()))
    after = [env.step({env.active_agents[0]: env.sample_random_action()}) for _ in range(4)]
    env.set_state(state)
    assert [env.step({env.active_agents[0]: env.sample_random_action()}) for _ in range(4)] == after
    twin = env.spawn(same_state=True)
    assert twin.get_state() == env.get_state()


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_opponent_env_is_a_conforming_single_agent_env(mode):
    check_env(OpponentEnv(Counter, mode=mode, num_agents=2), num_random_strings=30)


def test_opponent_env_rewards_and_bad_arguments():
    env = OpponentEnv(Counter(num_agents=2), opponent=lambda obs: "bad", seat="agent_1")
    obs, info = env.reset(seed=0)
    assert info["opponent_actions"] == [{"agent_0": "bad"}] and "agent_1" in obs
    _obs, reward, _t, _tr, info = env.step("good")
    assert reward == 1.0 and info["opponent_actions"] == [{"agent_0": "bad"}]
    twin = OpponentEnv(Counter(num_agents=2), "random", "agent_1").spawn()
    assert twin.seat == "agent_1" and isinstance(twin.game, Counter) and twin.game is not env.game
    with pytest.raises(ValueError, match="seat"):
        OpponentEnv(Counter, seat="nobody")
    with pytest.raises(ValueError, match="unknown opponent"):
        OpponentEnv(Counter, opponent="grandmaster")
    with pytest.raises(TypeError, match="MultiAgentEnv"):
        OpponentEnv(dict)


def test_runner_one_policy_per_agent_and_self_play():
    games = run(lambda: Counter(num_agents=2, max_steps=4),
                {"agent_0": lambda obs: "good", "agent_1": lambda obs: "bad"}, seeds=[0, 1])
    for game in games:
        assert game.returns == {"agent_0": 2.0, "agent_1": -2.0}
        assert [t.observation.split(":")[0] for t in game.agents["agent_0"].turns] == ["Step 0", "Step 2"]
        assert all(traj.done for traj in game.agents.values())
    seen = []

    async def shared(obs, context):
        seen.append(context.turn)
        return "good"

    (game,) = run(Counter(num_agents=2, mode="parallel", max_steps=3), shared, seeds=[5])
    assert game.returns == {"agent_0": 3.0, "agent_1": 3.0} and sorted(seen) == list(range(6))
    # max_steps truncates; a failing policy is recorded, not raised, with on_error="record"
    (cut,) = run(lambda: Counter(num_agents=2), lambda obs: "meh", seeds=[0], max_steps=3)
    assert cut.steps == 3 and cut.agents["agent_0"].turns[-1].truncated

    def broken(obs):
        raise RuntimeError("policy down")

    (failed,) = run(lambda: Counter(num_agents=2), broken, seeds=[0], on_error="record")
    assert "policy down" in failed.error


def test_self_play_in_worker_processes_plays_as_in_threads(monkeypatch):
    """``processes=`` (new): one shared policy plays both seats of games kept in two worker
    processes, and every game, agent and turn comes out as it does with the games in threads."""
    import functools
    import multiprocessing

    monkeypatch.setattr("gem.host.processes.default_start_method", lambda: "fork")
    workers = set()

    async def shared(obs, context):
        workers.update(c.name for c in multiprocessing.active_children() if c.name.startswith("gem-runner-"))
        return ["good", "bad", "meh"][(context.index + context.turn) % 3]

    game = functools.partial(Counter, num_agents=2, mode="parallel", max_steps=4)
    here = run(game, shared, seeds=range(6), concurrency=3)
    assert not workers
    there = run(game, shared, seeds=range(6), concurrency=3, processes=2)
    assert len(workers) == 2

    def played(games):
        return [(g.error, g.steps, {a: [(t.observation, t.action, t.reward, t.terminated, t.truncated)
                                        for t in traj.turns] for a, traj in g.agents.items()}) for g in games]

    assert played(there) == played(here)
    assert all(g.error is None and all(t.done for t in g.agents.values()) for g in there)
