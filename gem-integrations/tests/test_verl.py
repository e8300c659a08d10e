"""The verl adapter, built and run the way verl's ``AgentLoopWorker`` does it: looked up in
verl's agent-loop registry as ``gem_agent``, instantiated with ``hydra.utils.instantiate``
and the worker's arguments, and run against a server manager.

In training the server manager fronts vLLM/SGLang servers on GPUs; here it is a stand-in
returning verl's own ``TokenOutput`` with scripted guesses (as verl's CPU tests of agent
loops do). Runs in ``nox -s "integration(framework='verl')"``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

pytest.importorskip("verl")

import hydra
from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from gem_integrations.turns import turn_spans
from gem_integrations.verl import AGENT_NAME, ESTIMATOR, TURN_ENDS, TURN_REWARDS, gem_rows

LOGPROB = -0.5


class ScriptedServerManager:
    """``generate(request_id, prompt_ids, sampling_params)`` returning verl's TokenOutput."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies = tokenizer, replies
        self.request_ids: list[str] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.request_ids.append(request_id)
        turn = self.tokenizer.decode(prompt_ids).count("<|im_start|>assistant") - 1
        ids = [*self.tokenizer.encode(self.replies[turn], add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), stop_reason="completed")


def make_loop(tokenizer, server_manager, response_length=256):
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": response_length}},
        "data": {},
    })
    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME], trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager, tokenizer=tokenizer, processor=None, hf_model_type=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))


def run_row(tokenizer, server_manager, row, **kwargs):
    """Build the loop inside the running event loop (verl's worker does; the loop keeps it) and run one row."""

    async def main():
        return await make_loop(tokenizer, server_manager, **kwargs).run({"temperature": 1.0}, **row)

    return asyncio.run(main())


def test_registered_loop_plays_an_episode_with_masks_and_reward(tiny_tokenizer):
    secret = secret_of(ENV_ID, 3)
    wrong = 1 if secret != 1 else 2
    replies = [f"\\boxed{{{wrong}}}", f"\\boxed{{{secret}}}"]
    server = ScriptedServerManager(tiny_tokenizer, replies)
    out = run_row(tiny_tokenizer, server, gem_rows(ENV_ID, [3])[0])

    assert out.reward_score == 1.0 and out.extra_fields["env_success"] is True and out.num_turns == 5
    assert len(set(server.request_ids)) == 1  # one request id per episode
    ids, mask = out.response_ids, out.response_mask
    sampled = [t for t, m in zip(ids, mask, strict=True) if m == 1]
    eos = tiny_tokenizer.eos_token_id
    expected = [t for r in replies for t in [*tiny_tokenizer.encode(r, add_special_tokens=False), eos]]
    assert sampled == expected
    assert [lp for lp, m in zip(out.response_logprobs, mask, strict=True) if m == 1] == [LOGPROB] * len(expected)
    env_text = tiny_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
    assert "higher" in env_text.lower() or "lower" in env_text.lower()
    assert "between" in tiny_tokenizer.decode(out.prompt_ids)
    # verl turns the output into tensors; the last turn's reward (the only one here) on its last token
    tensors = out.as_dict()
    assert float(tensors["rm_scores"][-1]) == 1.0 and float(tensors["rm_scores"][:-1].abs().sum()) == 0.0


def test_response_budget_ends_the_episode(tiny_tokenizer):
    server = ScriptedServerManager(tiny_tokenizer, ["\\boxed{1}"] * 30)
    out = run_row(tiny_tokenizer, server, gem_rows(ENV_ID, [0])[0], response_length=12)
    assert len(out.response_ids) <= 12 and len(out.response_mask) == len(out.response_ids)
    # a turn cut by the budget keeps its reward inside the response
    assert all(end < len(out.response_ids) for end in out.extra_fields[TURN_ENDS])
    assert float(out.as_dict()["rm_scores"].sum()) == pytest.approx(out.reward_score)


def test_row_without_env_is_a_clear_error(tiny_tokenizer):
    with pytest.raises(ValueError, match="extra_info"):
        run_row(tiny_tokenizer, ScriptedServerManager(tiny_tokenizer, []), {"raw_prompt": [], "extra_info": {}})


def test_dataset_rows_reach_the_loop_through_verls_dataset(tmp_path, tiny_tokenizer):
    """gem_rows written to parquet and read back by verl's RLHFDataset give the loop its env and seed."""
    import pandas as pd

    pd.DataFrame(gem_rows(ENV_ID, [5, 6])).to_parquet(tmp_path / "train.parquet")
    config = OmegaConf.create({"max_prompt_length": 512, "return_raw_chat": True, "prompt_key": "prompt"})
    row = RLHFDataset(data_files=[str(tmp_path / "train.parquet")], tokenizer=tiny_tokenizer, config=config)[0]
    assert row["agent_name"] == AGENT_NAME and row["extra_info"]["seed"] == 5
    secret = secret_of(ENV_ID, 5)
    server = ScriptedServerManager(tiny_tokenizer, [f"\\boxed{{{secret}}}"])
    fields = {k: v for k, v in row.items() if k != "dummy_tensor"}
    assert run_row(tiny_tokenizer, server, fields).reward_score == 1.0


def three_turn_replies(seed):
    """Two wrong guesses, then the secret: a scripted GuessTheNumber episode of exactly three turns."""
    secret = secret_of(ENV_ID, seed)
    wrong = [n for n in (1, 2, 3) if n != secret][:2]
    return [f"\\boxed{{{wrong[0]}}}", f"\\boxed{{{wrong[1]}}}", f"\\boxed{{{secret}}}"]


def test_three_turn_episode_puts_each_turn_reward_on_its_last_sampled_token(tiny_tokenizer):
    """Per-turn rewards (issue 36): verl's token-level scores carry each turn's reward at that turn's
    last sampled token, not the episode's sum on the response's last token; the sampled tokens are
    exactly the server's, the env's observations masked."""
    replies = three_turn_replies(3)
    out = run_row(tiny_tokenizer, ScriptedServerManager(tiny_tokenizer, replies), gem_rows(ENV_ID, [3])[0])

    assert out.extra_fields["env_turns"] == 3 and out.extra_fields[TURN_REWARDS] == [0.0, 0.0, 1.0]
    spans = turn_spans(out.response_mask)
    assert len(spans) == 3
    eos = tiny_tokenizer.eos_token_id
    for (start, end), reply in zip(spans, replies, strict=True):
        assert out.response_ids[start:end] == [*tiny_tokenizer.encode(reply, add_special_tokens=False), eos]
        assert out.response_logprobs[start:end] == [LOGPROB] * (end - start)
    ends = [end - 1 for _, end in spans]
    assert out.extra_fields[TURN_ENDS] == ends
    # what verl's v1 trainer stores as token_level_scores (AgentLoopOutput.as_dict -> rm_scores)
    scores = out.as_dict()["rm_scores"]
    assert scores.shape == (len(out.response_ids),)
    assert {i: float(v) for i, v in enumerate(scores) if v} == {ends[2]: 1.0}
    assert float(scores.sum()) == out.reward_score == 1.0  # GRPO/RLOO, which sum them, see the return


def test_turn_rewards_other_than_the_last_land_on_their_turns(tiny_tokenizer):
    """A mid-episode reward (a wrapper paying 0.25 per valid guess) stays on its turn: pins an adapter
    that sums the turns' rewards onto the last token."""
    import gem

    class PerGuess(gem.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, reward + 0.25, terminated, truncated, info

    replies = three_turn_replies(4)
    server = ScriptedServerManager(tiny_tokenizer, replies)
    # the loop's env source may be a factory as well as an id (gem_integrations._support.env_factory)
    row = {"extra_info": {"env_id": lambda: PerGuess(gem.make(ENV_ID)), "seed": 4}}
    out = run_row(tiny_tokenizer, server, row)
    ends = [end - 1 for _, end in turn_spans(out.response_mask)]
    scores = out.as_dict()["rm_scores"]
    assert out.extra_fields[TURN_REWARDS] == [0.25, 0.25, 1.25]
    assert {i: float(v) for i, v in enumerate(scores) if v} == dict(zip(ends, [0.25, 0.25, 1.25], strict=True))


def synthetic_batch(generator):
    """(token rewards, response mask, per-turn rewards): episodes of 1-4 turns, observation tokens
    between turns, right padding, each turn's reward on its last token."""
    import torch

    rows, per_turn = [], []
    for b in range(6):
        turns = 1 + b % 4
        mask, rewards, episode = [], [], []
        for _ in range(turns):
            n = int(torch.randint(1, 5, (1,), generator=generator))
            reward = float(torch.randn(1, generator=generator))
            mask += [1] * n
            rewards += [0.0] * (n - 1) + [reward]
            episode.append(reward)
            mask += [0] * 2
            rewards += [0.0] * 2
        rows.append((mask, rewards))
        per_turn.append(episode)
    width = max(len(m) for m, _ in rows) + 3
    mask = torch.tensor([m + [0] * (width - len(m)) for m, _ in rows])
    rewards = torch.tensor([r + [0.0] * (width - len(r)) for _, r in rows])
    return rewards, mask, per_turn


@pytest.mark.parametrize("normalize", [True, False])
def test_gem_rebn_through_verls_compute_advantage_equals_gem_train(normalize):
    """`algorithm.adv_estimator=gem_rebn` through verl's own compute_advantage (ray_trainer, what the v1
    trainer calls), a real DataProto and AlgoConfig: every sampled token carries gem-train's ReBN advantage
    of its turn (to 1e-6), every other token 0."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from gem_train.algorithms.rebn import rebn_turn_advantages

    assert get_adv_estimator_fn(ESTIMATOR).__module__ == "gem_integrations.verl"
    rewards, mask, per_turn = synthetic_batch(torch.Generator().manual_seed(0))
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask},
                               non_tensors={"uid": np.array([str(b // 2) for b in range(len(mask))], dtype=object)})
    config = AlgoConfig(adv_estimator=ESTIMATOR, gamma=0.9, norm_adv_by_std_in_grpo=normalize)
    data = compute_advantage(data, adv_estimator=config.adv_estimator, gamma=config.gamma, lam=config.lam,
                             num_repeat=2, norm_adv_by_std_in_grpo=normalize, config=config)

    expected = rebn_turn_advantages(per_turn, gamma=0.9, normalize_std=normalize)
    advantages = data.batch["advantages"]
    for b, spans in enumerate(turn_spans(m) for m in mask.tolist()):
        assert len(spans) == len(expected[b])
        for (start, end), value in zip(spans, expected[b], strict=True):
            assert torch.allclose(advantages[b, start:end].double(), torch.full((end - start,), value,
                                                                              dtype=torch.float64), atol=1e-6)
    assert float(advantages[mask == 0].abs().sum()) == 0.0


def test_loop_outputs_train_through_gem_rebn_as_gem_train_would(tiny_tokenizer):
    """End to end on CPU, along verl's v1 trainer's own path: three episodes from the loop, each turned into
    its fields by ``as_dict()`` and stacked by ``list_of_dict_to_tensordict`` (AgentLoopWorkerTQ), padded into a
    DataProto with rm_scores as token_level_rewards and advantages from ``compute_advantage_for_multi_trajectories``
    (RayPPOTrainer v1's ``_compute_advantage``) with gem_rebn: each turn gets the advantage gem-train's ReBN gives
    the same per-turn rewards."""
    import numpy as np
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from gem_train.algorithms.rebn import rebn_turn_advantages

    outs = []
    for seed, replies in [(3, three_turn_replies(3)), (5, [f"\\boxed{{{secret_of(ENV_ID, 5)}}}"]),
                          (6, ["\\boxed{x}"])]:  # 3 turns, 1 turn, a format error (-0.1)
        server = ScriptedServerManager(tiny_tokenizer, replies)
        outs.append(run_row(tiny_tokenizer, server, gem_rows(ENV_ID, [seed])[0]))
    uids = ["a", "b", "c"]
    fields = [{**out.as_dict(), "uid": uid} for out, uid in zip(outs, uids, strict=True)]
    stored = list_of_dict_to_tensordict(fields)
    data = DataProto(batch=stored.select("response_mask", "rm_scores").to_padded_tensor())
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]  # algorithm.use_kl_in_reward=False
    data.non_tensor_batch["uid"] = np.array(uids, dtype=object)
    config = AlgoConfig(adv_estimator=ESTIMATOR, gamma=0.9)
    data = compute_advantage_for_multi_trajectories(
        data, batch_keys=[f"{uid}_0_0" for uid in uids], adv_estimator=config.adv_estimator, gamma=config.gamma,
        lam=config.lam, num_repeat=1, norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo, config=config)

    per_turn = [out.extra_fields[TURN_REWARDS] for out in outs]
    assert per_turn == [[0.0, 0.0, 1.0], [1.0], [-0.1]]
    expected = rebn_turn_advantages(per_turn, gamma=0.9)
    for b, out in enumerate(outs):
        spans = turn_spans(out.response_mask)
        got = [data.batch["advantages"][b, start:end].tolist() for start, end in spans]
        assert got == [pytest.approx([value] * (end - start), abs=1e-6)
                       for (start, end), value in zip(spans, expected[b], strict=True)]


def test_missing_framework_error_is_one_line_naming_the_readme_install():
    assert_missing_framework_is_one_line("verl", "verl")


RECIPES = Path(__file__).resolve().parents[2] / "examples" / "verl" / "recipes"


@pytest.mark.parametrize(("task", "launch", "nodes", "gamma"), [
    ("game_rebn", ["launch_1node.sh"], 1, 0.9), ("math_python_tool", ["launch_1node.sh"], 1, 1.0),
    ("game_rebn", ["launch_2nodes.sh", "head"], 2, 0.9), ("math_python_tool", ["launch_2nodes.sh", "head"], 2, 1.0)])
def test_recipe_dry_runs_build_and_validate_verls_config(tmp_path, task, launch, nodes, gamma):
    """Each recipe's launch script with --dry-run: composes verl's ppo_trainer config with the recipe's
    overrides, passes verl's validate_config for its GPUs, resolves gem_rebn the way verl's trainer process
    would (through model.external_lib) and writes the rows; no Ray, no model, no hub."""
    import subprocess
    import sys

    import pandas as pd

    script, *role = launch
    result = subprocess.run(["bash", str(RECIPES / script), *role, task, "--dry-run", "--out", str(tmp_path)],
                            env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "All configuration checks passed" in result.stdout
    command = result.stdout
    for override in ["algorithm.adv_estimator=gem_rebn", f"algorithm.gamma={gamma}", f"trainer.nnodes={nodes}",
                     "trainer.n_gpus_per_node=8", "actor_rollout_ref.model.external_lib=gem_integrations.verl"]:
        assert override in command
    rows = pd.read_parquet(tmp_path / "train.parquet")
    assert len(rows) == 500 * 32 and rows["agent_name"].eq(AGENT_NAME).all()
    if task == "math_python_tool":
        assert rows["extra_info"][0]["wrappers"] == "python_tool"


def test_recipe_dry_run_refuses_gem_rebn_the_trainer_process_would_not_find(tmp_path):
    """verl computes advantages in its trainer process, which imports gem_integrations.verl only through
    model.external_lib: a recipe without it would fail after Ray and the model are up; the dry run says so first."""
    import subprocess
    import sys

    (tmp_path / "no_lib.yaml").write_text("overrides:\n  actor_rollout_ref.model.external_lib: null\n")
    recipes = [str(RECIPES / "game_rebn.yaml"), str(RECIPES / "qwen3_1.7b_1node.yaml"), str(tmp_path / "no_lib.yaml")]
    result = subprocess.run([sys.executable, str(RECIPES.parent / "train_gem_agent.py"),
                             *(arg for path in recipes for arg in ("--recipe", path)),
                             "--steps", "1", "--dry-run", "--out", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "actor_rollout_ref.model.external_lib=gem_integrations.verl" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize("fault", ["raise", "hang", "die"])
def test_a_failing_env_ends_only_its_episode_and_the_batch_goes_on(tiny_tokenizer, monkeypatch, fault):
    """An env that raises, hangs past the step timeout, or whose worker process dies ends that sample's
    episode (reward 0 on its last token, env_failure naming the cause); the other samples of the batch,
    run at the same time by verl's worker, play on."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS

    from gem.factory import EnvFactory
    from gem.testing.envs import FaultyEnv
    from gem_integrations.verl import GemAgentLoop

    action, host, kind = FAULTS[fault]
    monkeypatch.setattr(GemAgentLoop, "env", EnvFactory("test:Faulty-v0", entry_point="gem.testing.envs:FaultyEnv"))
    monkeypatch.setattr(GemAgentLoop, "env_host", host)
    monkeypatch.setattr(GemAgentLoop, "step_timeout", FAULT_STEP_TIMEOUT)
    failing, healthy = ScriptedServerManager(tiny_tokenizer, [action]), ScriptedServerManager(tiny_tokenizer,
                                                                                               ["\\boxed{5}"] * 8)

    async def batch():
        loops = [make_loop(tiny_tokenizer, failing), make_loop(tiny_tokenizer, healthy)]
        return await asyncio.gather(*(loop.run({"temperature": 1.0}, extra_info={"seed": 2}) for loop in loops))

    failed, played = asyncio.run(batch())
    assert failed.reward_score == 0.0 and failed.extra_fields["env_failure"] == kind
    assert failed.extra_fields["env_turns"] == 1 and failed.extra_fields[TURN_REWARDS] == [0.0]
    twin, total, turns, done = FaultyEnv(), 0.0, 0, False
    twin.reset(seed=2)
    while not done:  # the healthy sample's episode, played in GEM itself
        _, reward, terminated, truncated, _ = twin.step("\\boxed{5}")
        total, turns, done = total + reward, turns + 1, terminated or truncated
    assert played.extra_fields["env_failure"] == ""
    assert (played.reward_score, played.extra_fields["env_turns"]) == (total, turns)


def test_envs_can_step_on_ray_actors_of_the_cluster(tiny_tokenizer):
    """env_host="ray" (a row's or the loop's): the episode's env lives in a Ray actor of the cluster the
    worker is connected to (verl's own, in training; a local one here) and plays exactly as in the
    worker's thread."""
    import ray

    secret = secret_of(ENV_ID, 3)
    replies = [f"\\boxed{{{1 if secret != 1 else 2}}}", f"\\boxed{{{secret}}}"]
    local = run_row(tiny_tokenizer, ScriptedServerManager(tiny_tokenizer, replies), gem_rows(ENV_ID, [3])[0])
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_row(tiny_tokenizer, ScriptedServerManager(tiny_tokenizer, replies),
                         gem_rows(ENV_ID, [3], env_host="ray", step_timeout=60)[0])
        import subprocess

        processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
        assert "ray::_SlotActor" in processes  # the env's actor, kept for the next episode
    finally:
        from gem.host.hosted import close_idle

        close_idle()
        ray.shutdown()
    assert (remote.response_ids, remote.response_mask, remote.reward_score, remote.extra_fields) == \
        (local.response_ids, local.response_mask, local.reward_score, local.extra_fields)
