"""The Tinker cookbook adapter, exercised the way the cookbook runs envs: its own
``do_group_rollout`` over our ``EnvGroupBuilder`` and its own ``trajectory_to_data``.

Sampling and training need Tinker's hosted service; the policy here is a stand-in
``TokenCompleter`` (the cookbook's policy interface) that plays scripted guesses in
tokens. Runs in ``nox -s "integration(framework='tinker')"``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tinker_cookbook")

from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.rollouts import do_group_rollout

from gem.conventions import FORMAT_ERROR_REWARD
from gem_integrations.tinker import GemDatasetBuilder, GemEnvGroupBuilder

RENDERER = "qwen3_instruct"


class ScriptedCompleter(TokenCompleter):
    """Plays ``replies[turn]`` (text), in tokens, ending with the renderer's stop token
    unless ``stop=False``; the turn is read off the prompt (one generation prompt per turn)."""

    def __init__(self, tokenizer, replies, stop=True):
        self.tokenizer, self.replies, self.stop = tokenizer, replies, stop
        self.prompts: list[list[int]] = []

    async def __call__(self, model_input, stop, *, max_tokens=None):
        ids = model_input.to_ints()
        self.prompts.append(ids)
        turn = self.tokenizer.decode(ids).count("<|im_start|>assistant") - 1
        tokens = self.tokenizer.encode(self.replies[turn], add_special_tokens=False)
        if self.stop:
            tokens += [t for t in stop if isinstance(t, int)][:1] or self.tokenizer.encode(stop[0])
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.25] * len(tokens))


def builder(tokenizer_dir, seed=3, group_size=2):
    return GemEnvGroupBuilder(env_id=ENV_ID, seed=seed, group_size=group_size, renderer_name=RENDERER,
                              model_name_for_tokenizer=str(tokenizer_dir))


def test_group_rollout_plays_multi_turn_episodes_and_masks_env_tokens(tiny_tokenizer_dir, tiny_tokenizer):
    secret = secret_of(ENV_ID, 3)
    wrong = 1 if secret != 1 else 2
    policy = ScriptedCompleter(tiny_tokenizer, [f"\\boxed{{{wrong}}}", f"\\boxed{{{secret}}}"])
    group = asyncio.run(do_group_rollout(builder(tiny_tokenizer_dir), policy))

    assert len(group.trajectories_G) == 2
    for traj in group.trajectories_G:
        assert [t.reward for t in traj.transitions] == [0.0, 1.0]
        assert traj.transitions[-1].episode_done
        assert traj.transitions[-1].metrics["env_return"] == 1.0
        assert traj.transitions[-1].metrics["env_success"] == 1.0
        # every observation extends the previous one, so the cookbook makes one datum of the episode
        (datum,) = trajectory_to_data(traj, traj_advantage=1.0)
        mask = datum.loss_fn_inputs["mask"].tolist()
        targets = datum.loss_fn_inputs["target_tokens"].tolist()
        sampled = [tok for tok, m in zip(targets, mask, strict=True) if m > 0]
        assert sampled == traj.transitions[0].ac.tokens + traj.transitions[1].ac.tokens
        env_text = tiny_tokenizer.decode([tok for tok, m in zip(targets, mask, strict=True) if m == 0])
        assert "higher" in env_text.lower() or "lower" in env_text.lower()
    # both members of the group saw the same first observation (same seed)
    firsts = [p for p in policy.prompts if tiny_tokenizer.decode(p).count("<|im_start|>assistant") == 1]
    assert len(firsts) == 2 and firsts[0] == firsts[1]


def test_three_turn_episode_keeps_each_turns_reward_and_tokens_until_the_cookbook_sums_them(tiny_tokenizer_dir,
                                                                                               tiny_tokenizer):
    """Three turns (two misses, then the secret): each Transition holds that turn's reward and the
    sampler's exact tokens and logprobs; the cookbook's RL loop (compute_advantages +
    assemble_training_data, tinker-cookbook 0.6.1) then credits the trajectory's summed reward,
    centred in its group, to every sampled token alike: what examples/tinker/README.md says."""
    from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages

    secret = secret_of(ENV_ID, 3)
    replies = [*(f"\\boxed{{{g}}}" for g in [g for g in range(1, 11) if g != secret][:2]), f"\\boxed{{{secret}}}"]
    winner = ScriptedCompleter(tiny_tokenizer, replies)
    group = asyncio.run(do_group_rollout(builder(tiny_tokenizer_dir, group_size=1), winner))
    (traj,) = group.trajectories_G
    assert [t.reward for t in traj.transitions] == [0.0, 0.0, 1.0]
    for transition, reply in zip(traj.transitions, replies, strict=True):
        ids = tiny_tokenizer.encode(reply, add_special_tokens=False)
        assert transition.ac.tokens[:-1] == ids  # then the renderer's stop token
        assert transition.ac.maybe_logprobs == [-0.25] * len(transition.ac.tokens)

    # a second group member that never finds the secret, so the group-centred advantage is not 0
    loser = ScriptedCompleter(tiny_tokenizer, [replies[0]] * 20)
    lost = asyncio.run(do_group_rollout(builder(tiny_tokenizer_dir, group_size=1), loser)).trajectories_G[0]
    group.trajectories_G.append(lost)
    group.final_rewards_G.append(0.0)
    group.metrics_G.append({})
    data, _ = assemble_training_data([group], compute_advantages([group]))
    winner_datum = data[0]
    mask = winner_datum.loss_fn_inputs["mask"].tolist()
    advantages = winner_datum.loss_fn_inputs["advantages"].tolist()
    sampled = [a for a, m in zip(advantages, mask, strict=True) if m > 0]
    assert len(sampled) == sum(len(t.ac.tokens) for t in traj.transitions)
    centred = (sum(t.reward for t in traj.transitions) - sum(t.reward for t in lost.transitions)) / 2
    assert centred != 0 and sampled == pytest.approx([centred] * len(sampled))  # one value, every turn


def test_unparseable_reply_is_a_format_error(tiny_tokenizer_dir, tiny_tokenizer):
    policy = ScriptedCompleter(tiny_tokenizer, ["\\boxed{5}"], stop=False)
    group = asyncio.run(do_group_rollout(builder(tiny_tokenizer_dir, group_size=1), policy))
    (traj,) = group.trajectories_G
    assert [t.reward for t in traj.transitions] == [FORMAT_ERROR_REWARD]


def test_builders_pickle_and_dataset_batches_cover_distinct_seeds(tiny_tokenizer_dir):
    clone = pickle.loads(pickle.dumps(builder(tiny_tokenizer_dir)))
    assert (clone.env_id, clone.seed, clone.group_size) == (ENV_ID, 3, 2)
    train, test = asyncio.run(GemDatasetBuilder(env_id=ENV_ID, renderer_name=RENDERER,
                                                model_name_for_tokenizer=str(tiny_tokenizer_dir),
                                                batch_size=3, group_size=2, n_batches=4, test_groups=2)())
    seeds = [b.seed for i in range(len(train)) for b in train.get_batch(i)]
    assert len(train) == 4 and seeds == list(range(12))
    assert [b.seed for b in test.get_batch(0)] == [12, 13] and test.get_batch(0)[0].group_size == 1
    with pytest.raises(IndexError):
        train.get_batch(4)
    envs = asyncio.run(train.get_batch(0)[0].make_envs())
    assert len(envs) == 2


def test_missing_framework_error_is_one_line_naming_the_readme_install():
    assert_missing_framework_is_one_line("tinker", "tinker_cookbook")


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tinker" / "train_gem.py"


def run_example(tmp_path, *args, hide_gem_train=False):
    """The example as a user runs it, with HF_HUB_OFFLINE unset (the script's own default decides)."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    hide = "sys.modules['gem_train'] = None; " if hide_gem_train else ""
    code = (f"import runpy, sys; {hide}sys.argv = [{str(EXAMPLE)!r}, *{list(args)!r}]; "
            f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)


def test_local_rollout_defaults_to_gem_trains_tiny_tokenizer_without_the_hub(tmp_path):
    result = run_example(tmp_path, "--local-rollout", "--group-size", "2", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["episode 0", "episode 1"]
    assert (tmp_path / "out" / "tiny-tokenizer" / "tokenizer.json").exists()


def test_local_rollout_without_gem_train_or_hub_says_what_to_pass(tmp_path):
    result = run_example(tmp_path, "--local-rollout", "--out", str(tmp_path / "out"), hide_gem_train=True)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr and "--tokenizer PATH" in last and "HF_HUB_OFFLINE=0" in last


@pytest.mark.parametrize("fault", ["raise", "hang", "die"])
def test_a_failing_env_ends_only_its_episode_and_the_cookbooks_rollout_goes_on(tiny_tokenizer_dir, tiny_tokenizer,
                                                                               gem_plugins_catalog, monkeypatch,
                                                                               fault):
    """Under the cookbook's do_group_rollout, a GEM env that raises, hangs past the step timeout, or whose
    worker process dies ends that episode (reward 0, env_failure 1 in its metrics); a group rolled out at
    the same time plays on with GEM's rewards."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS

    import gem_integrations.tinker as adapter
    from gem.factory import EnvFactory
    from gem.testing.envs import FaultyEnv

    action, host, _ = FAULTS[fault]
    # the id known in a fresh worker process too (its entry point registers it there)
    monkeypatch.setattr(adapter, "env_factory", lambda env_id: EnvFactory(env_id,
                                                                          entry_point="gem.testing.envs:FaultyEnv"))

    def group(replies):
        built = GemEnvGroupBuilder(env_id="test:Faulty-v0", seed=2, group_size=1, renderer_name=RENDERER,
                                   model_name_for_tokenizer=str(tiny_tokenizer_dir), env_host=host,
                                   step_timeout=FAULT_STEP_TIMEOUT)
        return do_group_rollout(built, ScriptedCompleter(tiny_tokenizer, replies))

    async def both():
        return await asyncio.gather(group([action]), group(["\\boxed{5}"] * 8))

    failed, played = asyncio.run(both())
    (lost,), (won,) = failed.trajectories_G, played.trajectories_G
    assert [t.reward for t in lost.transitions] == [0.0] and lost.transitions[-1].metrics["env_failure"] == 1.0
    twin, rewards, done = FaultyEnv(), [], False
    twin.reset(seed=2)
    while not done:
        _, reward, terminated, truncated, _ = twin.step("\\boxed{5}")
        rewards, done = [*rewards, reward], terminated or truncated
    assert [t.reward for t in won.transitions] == rewards and won.transitions[-1].metrics["env_failure"] == 0.0
