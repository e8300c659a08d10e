"""Episodes through gem's runner keep every turn's prompt ids, response ids and sampler logprobs."""

from __future__ import annotations

import pytest
from toy_env import Chatter, ToyGuess

from gem.wrappers import apply_wrappers
from gem_train.engines import Sampling, make_engine
from gem_train.envs import EnvFactory
from gem_train.model import load_policy
from gem_train.rollout import PROMPT_TOO_LONG, EnginePolicy, StepClock, collect, encode_prompt, union_seconds


@pytest.fixture(scope="module")
def engine_and_tok(tiny_model_path):
    _, tok = load_policy(tiny_model_path)
    return make_engine("hf", str(tiny_model_path)), tok


def make_env(tok, wrappers="messages", env=ToyGuess):
    return lambda: apply_wrappers(env(max_turns=3), wrappers, tokenizer=tok)


def test_encode_prompt_applies_the_template_once(engine_and_tok):
    _, tok = engine_and_tok
    msgs = [{"role": "user", "content": "hi"}]
    templated = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    expected = tok(templated, add_special_tokens=False)["input_ids"]
    assert encode_prompt(tok, msgs, templated=False) == expected
    assert encode_prompt(tok, "hi", templated=False) == expected  # plain text becomes one user message
    assert encode_prompt(tok, templated, templated=True) == expected  # concat_chat already rendered it


def test_collect_keeps_tokens_logprobs_and_rewards(engine_and_tok):
    engine, tok = engine_and_tok
    policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=6, seed=0), max_model_len=256)
    episodes = collect(make_env(tok), policy, seeds=list(range(6)), concurrency=6)
    assert [ep.seed for ep in episodes] == list(range(6))
    for ep in episodes:
        traj = ep.trajectory
        assert len(ep.turns) == len(traj.turns) >= 1
        for sample, turn in zip(ep.turns, traj.turns):
            assert sample.reward == turn.reward
            assert sample.prompt_ids == encode_prompt(tok, turn.observation, templated=False)
            assert len(sample.logprobs) == len(sample.response_ids) >= 1
            assert tok.decode(sample.response_ids, skip_special_tokens=True) == turn.action
            assert sample.finish_reason == ("stop" if sample.response_ids[-1] == tok.eos_token_id else "length")
    # six episodes started together: their first turns shared generate calls
    assert policy.generate_calls < sum(len(ep.turns) for ep in episodes)


def test_concat_chat_observations_are_not_templated_twice(engine_and_tok):
    engine, tok = engine_and_tok
    policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=6, seed=0), max_model_len=256,
                          templated=True)
    [episode] = collect(make_env(tok, wrappers="concat_chat"), policy, seeds=[0])
    for sample, turn in zip(episode.turns, episode.trajectory.turns):
        assert turn.observation.startswith("<|im_start|>user")
        assert sample.prompt_ids == tok(turn.observation, add_special_tokens=False)["input_ids"]


def test_responses_cut_at_max_tokens_are_marked(engine_and_tok):
    engine, tok = engine_and_tok
    policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=1, seed=0), max_model_len=256)
    episodes = collect(make_env(tok), policy, seeds=[0, 1, 2])
    cut = [t for ep in episodes for t in ep.turns if t.finish_reason == "length"]
    assert cut and all(len(t.response_ids) == 1 for t in cut)


def test_prompt_longer_than_the_model_is_an_invalid_action(engine_and_tok):
    engine, tok = engine_and_tok
    first = encode_prompt(tok, [{"role": "user", "content": Chatter().reset(seed=0)[0]}], templated=False)
    # room for the first prompt and a response, not for the grown history of turn two
    policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=4, seed=0),
                          max_model_len=len(first) + 4)
    episodes = collect(make_env(tok, env=Chatter), policy, seeds=list(range(4)))
    for ep in episodes:
        assert len(ep.turns) == 3
        assert ep.turns[0].finish_reason != PROMPT_TOO_LONG and ep.turns[0].response_ids
        for later, turn in zip(ep.turns[1:], ep.trajectory.turns[1:]):
            # the env got an empty action (GEM's invalid action) and the learner gets no tokens
            assert later.finish_reason == PROMPT_TOO_LONG and later.response_ids == [] and later.logprobs == []
            assert turn.action == "" and later.reward == 0.1


def test_union_seconds_counts_overlaps_once():
    assert union_seconds([(0, 2), (1, 3), (5, 6)]) == 4
    # env steps during generation are not waiting time
    assert union_seconds([(0, 4), (6, 7)], minus=[(1, 2), (3, 6.5)]) == pytest.approx(2.5)
    assert union_seconds([]) == 0


def test_step_clock_records_each_step_of_each_episode(engine_and_tok):
    engine, tok = engine_and_tok
    steps: list[tuple[float, float]] = []
    policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=6, seed=0), max_model_len=256)
    episodes = collect(lambda: StepClock(make_env(tok)(), steps), policy, seeds=range(4), concurrency=4)
    assert len(steps) == sum(len(ep.turns) for ep in episodes)
    assert all(end >= start for start, end in steps)
    assert len(policy.generate_intervals) == policy.generate_calls


def test_envs_in_worker_processes_play_the_episodes_threads_play(engine_and_tok, gem_registry):
    """rollout.processes: the run's env factory pickles into gem's worker processes (which register the id from
    its entry point when they start without it), and the seeded episodes come out as in threads."""
    engine, tok = engine_and_tok
    make_env = EnvFactory("toy:Guess-v0", entry_point="toy_env:ToyGuess").wrapped("messages", tok)

    def play(**limits):
        policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=6, seed=0), max_model_len=256)
        episodes = collect(make_env, policy, seeds=range(4), concurrency=4, **limits)
        assert all(ep.error is None for ep in episodes)
        return [[(t.prompt_ids, t.response_ids, t.reward) for t in ep.turns] for ep in episodes]

    assert play(processes=2) == play()
