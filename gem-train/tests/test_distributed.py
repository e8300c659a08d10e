"""Data-parallel learners under torchrun, with gloo on CPU and two real processes.

The guarantee: two ranks that each hold part of a batch make the same update as one process
holding all of it. The learner cases run in one torchrun launch of this file (its ``__main__``
is the worker); the trainer runs end to end through ``torchrun -m gem_train`` in both rollout
modes and is compared with the same run in one process.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from gem_train import distributed
from gem_train.algorithms.advantages import turn_advantages
from gem_train.config import AlgoConfig, ConfigError, TrainConfig, TrainerConfig, validate
from gem_train.critic import make_critic
from gem_train.learner import Learner
from gem_train.metrics_log import read_metrics
from gem_train.model import load_policy
from gem_train.rollout import TurnSample

TESTS = Path(__file__).parent
TORCHRUN = Path(sys.executable).parent / "torchrun"

# name -> (algo fields, trainer fields, turns held by rank 0 of the 9; rank 1 holds the rest)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {
    "reinforce_constant_norm": ({}, {}, 3),
    "reinforce_length_norm_2_minibatches": ({"loss_norm": "length"}, {"minibatches": 2}, 3),
    "ppo_clip_2_epochs_2_minibatches": ({"loss": "ppo_clip", "epochs": 2, "loss_norm": "length"},
                                        {"minibatches": 2}, 3),
    "ppo_shared_critic": ({"name": "ppo", "loss": "ppo_clip", "epochs": 2, "critic": "shared"}, {"minibatches": 2}, 5),
    "ppo_separate_critic": ({"name": "ppo", "loss": "ppo_clip", "critic": "separate"}, {}, 3),
    # rank 0 learns from nothing and must still join every step's gradient all-reduce
    "rank_0_holds_no_turns": ({}, {"minibatches": 2}, 0),
    # and with a critic: rank 0's one turn falls in one of the four minibatches
    "ppo_rank_0_holds_one_turn": ({"name": "ppo", "loss": "ppo_clip"}, {"minibatches": 4}, 1),
    "sft": ({}, {}, 3),
}
ADVANTAGES = [1.0, 0.0, -0.5, 0.3, 0.9, -1.2, 0.7, -0.2, 0.4]
OLD_VALUES = [0.1 * i for i in range(9)]
TARGETS = [0.5, -0.3, 1.0, 0.2, 0.0, -1.0, 0.8, 0.3, -0.4]
# rewards of five episodes, the first two on rank 0: ReBN and PPO's whitening need the global moments
REWARDS = [[0.0, 1.0], [-0.1], [0.0, 0.0, 1.0], [0.5], [0.0, -0.1]]
VALUES = [[0.2, 0.1], [0.0], [0.3, -0.2, 0.4], [0.1], [0.0, 0.2]]


def learner_for(path: Path, name: str) -> Learner:
    """The case's learner on a fresh copy of the tiny model, with the same shuffle seed.

    Plain SGD: a step proportional to the gradient, so the weights compare the gradients. (AdamW's first step,
    ``lr * g / (|g| + eps)``, would blow the rounding noise of near-zero gradients up to a sizeable part of lr.)
    """
    algo, trainer, _ = CASES[name]
    model, tok = load_policy(path)
    cfg = AlgoConfig(**algo)
    critic = make_critic(model, cfg.critic) if cfg.name == "ppo" else None
    learner = Learner(model, cfg, TrainerConfig(micro_batch_size=2, **trainer), 1.0, 8.0, tok.pad_token_id, seed=3,
                      critic=critic)
    learner.optimizer = torch.optim.SGD([p for group in learner.optimizer.param_groups for p in group["params"]],
                                        lr=0.5)
    return learner


def run_case(path: Path, name: str, samples: list[TurnSample], first: int, last: int
             ) -> tuple[Learner, dict[str, float]]:
    """Update on ``samples[first:last]`` (this process's share; all of them in a single process)."""
    learner = learner_for(path, name)
    if name == "sft":
        return learner, learner.supervised_update(samples[first:last])
    extra = {}
    if learner.critic is not None:
        extra = {"old_values": OLD_VALUES[first:last], "value_targets": TARGETS[first:last]}
    return learner, learner.update(samples[first:last], ADVANTAGES[first:last], seed=11, **extra)


def weights(learner: Learner) -> dict[str, torch.Tensor]:
    out = {f"policy.{k}": v.clone() for k, v in learner.model.state_dict().items()}
    if learner.critic is not None:
        out.update({f"critic.{k}": v.clone() for k, v in learner.critic.state_dict().items()})
    return out


def worker(data_file: str, out_file: str) -> None:
    """One rank of the learner cases (run by torchrun): each rank updates on its share; rank 0 saves."""
    torch.set_num_threads(1)
    distributed.init("cpu")
    with open(data_file, "rb") as f:
        data = pickle.load(f)
    samples, path = data["samples"], data["path"]
    results: dict[str, Any] = {}
    for name, (_, _, split) in CASES.items():
        first, last = (0, split) if distributed.rank() == 0 else (split, len(samples))
        learner, metrics = run_case(path, name, samples, first, last)
        assert isinstance(learner.net, torch.nn.parallel.DistributedDataParallel)
        results[name] = {"weights": weights(learner), "metrics": metrics}
    share = slice(0, 2) if distributed.rank() == 0 else slice(2, None)
    for estimator in ("rebn", "ppo"):
        adv = turn_advantages(REWARDS[share], list(range(5))[share], estimator, 0.9, values=VALUES[share], lam=0.8,
                              reduce=distributed.all_reduce_moments)
        results[estimator] = [a for part in distributed.all_gather(adv) for ep in part for a in ep]
    if distributed.is_main():
        torch.save(results, out_file)
    distributed.shutdown()


def torchrun(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """Two ranks on this machine; a hang fails the test at ``timeout`` instead of stalling the suite."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(TORCHRUN), "--standalone", "--nproc_per_node", "2", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def two_ranks(tiny_model_path, tmp_path_factory) -> dict[str, Any]:
    from test_learner import samples_from

    model, tok = load_policy(tiny_model_path)
    samples = samples_from(model, tok, n=8)
    # a turn without a response sits in rank 0's share: the learner drops it before indexing the batch
    samples.insert(1, TurnSample(samples[0].prompt_ids, [], [], "prompt_too_long"))
    folder = tmp_path_factory.mktemp("two_ranks")
    with open(folder / "data.pkl", "wb") as f:
        pickle.dump({"samples": samples, "path": tiny_model_path}, f)
    torchrun(__file__, str(folder / "data.pkl"), str(folder / "out.pt"), timeout=300)
    return {"samples": samples, "ranks": torch.load(folder / "out.pt", weights_only=False)}


@pytest.mark.parametrize("name", list(CASES))
def test_an_update_on_two_ranks_equals_the_update_on_the_whole_batch(tiny_model_path, two_ranks, name):
    samples = two_ranks["samples"]
    learner, metrics = run_case(tiny_model_path, name, samples, 0, len(samples))
    assert not learner.parallel
    whole, ranks = weights(learner), two_ranks["ranks"][name]
    start = weights(learner_for(tiny_model_path, name))
    assert any(not torch.equal(whole[k], start[k]) for k in whole)  # the update moved the weights
    assert whole.keys() == ranks["weights"].keys()
    for key in whole:
        assert torch.allclose(whole[key], ranks["weights"][key], atol=1e-5), key
    assert metrics.keys() == ranks["metrics"].keys()
    for key, value in metrics.items():
        assert ranks["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("estimator", ["rebn", "ppo"])
def test_batch_statistics_are_all_reduced(two_ranks, estimator):
    whole = turn_advantages(REWARDS, list(range(5)), estimator, 0.9, values=VALUES, lam=0.8)
    assert two_ranks["ranks"][estimator] == pytest.approx([a for ep in whole for a in ep], abs=1e-9)


def test_a_plain_process_is_a_world_of_one():
    assert (distributed.launched(), distributed.active(), distributed.rank(), distributed.world_size()) == (
        False, False, 0, 1)
    assert distributed.all_reduce_moments((2.0, 3.0, 5.0)) == (2.0, 3.0, 5.0)
    assert distributed.all_sum({"a": 1.0}) == {"a": 1.0} and distributed.all_gather(7) == [7]
    assert distributed.scatter([["share"]]) == ["share"] and distributed.main_first(lambda: 4) == 4
    # shares of 10 items among 4 ranks: contiguous, in rank order, sizes differing by at most one
    assert [distributed.shard_range(10, r, 4) for r in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert distributed.shard_range(1, 1, 2) == (1, 1)


@pytest.mark.parametrize(("field", "value", "why"), [
    ("rollout", "everywhere", "every_rank, rank0"),
    ("backend", "mpi", "auto, gloo, nccl"),
    ("timeout_minutes", 0.0, "> 0"),
])
def test_distributed_fields_are_validated(field, value, why):
    cfg = TrainConfig()
    setattr(cfg.trainer.distributed, field, value)
    with pytest.raises(ConfigError, match=rf"^trainer\.distributed\.{field}: .*{why}"):
        validate(cfg)


@pytest.mark.parametrize(("setting", "why"), [
    ({"strategy": "zero3"}, "must be ddp or fsdp"),
    ({"strategy": "fsdp", "algo": "ppo"}, "ppo's critic needs trainer.strategy=ddp"),
    ({"strategy": "fsdp", "sft": 8}, "without an SFT warm start"),
])
def test_the_strategy_is_validated(setting, why):
    cfg = TrainConfig()
    cfg.trainer.strategy = setting["strategy"]
    cfg.trainer.sft.episodes = setting.get("sft", 0)
    cfg.algo.name = setting.get("algo", "rebn")
    with pytest.raises(ConfigError, match=rf"^trainer\.strategy: .*{why}"):
        validate(cfg)


def test_rank0_rollouts_need_the_hf_engine():
    cfg = TrainConfig()
    cfg.trainer.distributed.rollout, cfg.rollout.engine = "rank0", "vllm"
    with pytest.raises(ConfigError, match=r"^trainer\.distributed\.rollout: rank0 cannot drive rollout\.engine=vllm"):
        validate(cfg)


def _compare_runs(single: Path, ranks: Path) -> None:
    """The torchrun run's metrics and final weights are the single process's: the same episodes (each request
    seeded by its episode's global index), the same update."""
    a, b = read_metrics(single / "metrics.jsonl"), read_metrics(ranks / "metrics.jsonl")
    assert [(r["kind"], r.get("iteration")) for r in a] == [(r["kind"], r.get("iteration")) for r in b]
    for ra, rb in zip(a, b):
        for key in ("episodes", "return", "turns", "response_tokens", "format_errors", "turns_trained", "sft_loss",
                    "eval_return", "loss", "entropy", "kl_sampler", "grad_norm", "critic_grad_norm", "value_loss",
                    "value_mean", "explained_variance"):
            if key in ra:
                assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-6), (ra["kind"], ra.get("iteration"), key)
    from safetensors.torch import load_file

    last = sorted((single / "checkpoints").iterdir())[-1].name
    assert sorted(p.name for p in (single / "checkpoints").iterdir()) == sorted(
        p.name for p in (ranks / "checkpoints").iterdir())
    wa, wb = (load_file(run / "checkpoints" / last / "model.safetensors") for run in (single, ranks))
    for key in wa:
        # AdamW steps of about lr=1e-3 also where a gradient is rounding noise: equal to a small part of that
        assert torch.allclose(wa[key], wb[key], atol=1e-4), key


# ReBN on a three-turn env (nonzero advantages); two waves of 8 episodes cut to 30 turns, which splits rank 1's
# share of the second wave
EVERY_RANK = ["env=custom", "env.id=toy:Chatter-v0", "env.entry_point=toy_env:Chatter", "trainer.sft.episodes=0",
              "rollout.turns_per_iter=30", "trainer.distributed.rollout=every_rank"]
# PPO after an SFT stage (the SFT learner is data-parallel too); rank 0 plays, the critic's values travel with
# the turns
RANK0 = ["env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess", "env.demonstrator=toy_env:Bisect",
         "algo=ppo", "trainer.iterations=1", "trainer.distributed.rollout=rank0"]


# FSDP2 (issue 35, point 5): each rank holds half of the float32 weights, gradients and AdamW state
FSDP = [*EVERY_RANK, "trainer.strategy=fsdp"]


@pytest.mark.parametrize("mode", [EVERY_RANK, RANK0, FSDP], ids=["every_rank", "rank0", "fsdp"])
def test_torchrun_trains_like_one_process(tmp_path, gem_registry, mode):
    from test_train import smoke_config

    from gem_train.trainer import train

    # torch threads stay as they are: in-process vLLM (a later test) fails once the count was changed
    common = [*mode, "trainer.device=cpu", "trainer.tensorboard=false"]
    train(smoke_config(tmp_path / "single", *common))
    out = tmp_path / "ranks"
    done = torchrun("-m", "gem_train", "experiment=smoke", *common, f"experiment.output_dir={out}", timeout=300)
    _compare_runs(tmp_path / "single", out)
    records = read_metrics(out / "metrics.jsonl")
    # rank 0 alone writes: each record once, and one console line per record
    assert len({(r["kind"], r.get("iteration"), r.get("epoch")) for r in records}) == len(records)
    assert done.stdout.count("[train]") == sum(r["kind"] == "train" for r in records)
    assert (out / "curves.txt").exists() and (out / "hydra" / "config.yaml").exists()
    if mode is not RANK0:
        assert [r["turns_trained"] for r in records if r["kind"] == "train"] == [30.0, 30.0]


def test_a_two_rank_fsdp_paper_sim_run_matches_the_one_process_run(tmp_path):
    """The paper path on CPU (a Qwen3-architecture model with Qwen3's 151,936-row vocabulary, bf16 compute on
    float32 masters, gradient checkpointing, chunked log-probs), its learner sharded over two gloo ranks with
    FSDP2, against one process. Collected per iteration by the batch engine: which episodes finish first under
    carry-over, and which requests share a continuous batch, depend on timing."""
    common = ["experiment=baselines/guess_the_number", "scale=paper_sim", "trainer.iterations=2",
              "rollout=hf", "rollout.carry_over=false", "trainer.tensorboard=false", "trainer.lr=1e-4"]
    single, ranks = tmp_path / "single", tmp_path / "ranks"
    done = subprocess.run([sys.executable, "-m", "gem_train", *common, f"experiment.output_dir={single}"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    torchrun("-m", "gem_train", *common, "trainer.strategy=fsdp", f"experiment.output_dir={ranks}", timeout=600)
    _compare_runs(single, ranks)



def test_a_two_rank_fsdp_paper_sim_run_trains_on_its_own_rollouts(tmp_path):
    """scale=paper_sim as composed under torchrun: each rank's hf_async engine batches continuously and carries
    episodes over, and the weight sync feeds it from the FSDP shards (what the run does is timing's, so only its
    shape is checked here)."""
    out = tmp_path / "ranks"
    done = torchrun("-m", "gem_train", "experiment=baselines/guess_the_number", "scale=paper_sim",
                    "trainer.iterations=2", "trainer.strategy=fsdp", "trainer.tensorboard=false",
                    f"experiment.output_dir={out}", timeout=600)
    assert "sampler (hf_async)" in done.stdout
    train = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["turns_trained"] for r in train] == [32.0, 32.0]  # turns_per_iter, over both ranks
    assert all(r["staleness_mean"] <= 1 for r in train)  # rollout.max_staleness

def _whole_and_resumed(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    """Two-rank runs of three iterations on Chatter: in one go, and two then a resumed third; their metrics and
    weights compared. Returns the two run folders."""
    common = ["experiment=smoke", "env=custom", "env.id=toy:Chatter-v0", "env.entry_point=toy_env:Chatter",
              "trainer.sft.episodes=0", *extra, "trainer.eval_every=0", "trainer.checkpoint_every=1",
              "trainer.device=cpu", "trainer.tensorboard=false"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    torchrun("-m", "gem_train", *common, "trainer.iterations=3", f"experiment.output_dir={whole}", timeout=300)
    torchrun("-m", "gem_train", *common, "trainer.iterations=2", f"experiment.output_dir={split}", timeout=300)
    torchrun("-m", "gem_train", *common, "trainer.iterations=3", f"experiment.output_dir={split}", timeout=300)
    assert [r["iteration"] for r in read_metrics(split / "metrics.jsonl")] == [1, 2, 3]
    _compare_runs(whole, split)
    return whole, split


def test_a_resumed_fsdp_run_repeats_an_uninterrupted_one(tmp_path):
    """Sharded, the checkpoint holds the gathered float32 weights and AdamW state, and a resume reshards both."""
    whole, split = _whole_and_resumed(tmp_path, "trainer.strategy=fsdp")
    state = torch.load(split / "checkpoints" / "iter_000003" / "optimizer.pt", weights_only=True)
    # gathered from the shards: keyed by parameter name (an unsharded optimizer keys by position)
    assert state["state"] and all(isinstance(k, str) for k in state["state"])
    assert all(v["exp_avg"].dtype == torch.float32 for v in state["state"].values())


def test_only_rank0_keeps_the_weights_gathered_for_a_checkpoint():
    """Every rank takes part in each gather of a sharded checkpoint (collectives), but only rank 0 keeps what it
    gathers, in host memory; another rank lets each weight go on its device. A stand-in for the sharded learner,
    which records what was asked of it; the gathers themselves run in the two-rank FSDP tests above."""
    from gem_train.trainer import _gather_for_checkpoint

    class Sharded:
        sharded = True

        def __init__(self) -> None:
            self.taken, self.devices = 0, []

        def iter_weights(self, dtype=None, device=None):
            self.devices.append(device)
            for name in ("embed", "norm"):
                self.taken += 1
                yield name, torch.ones(2)

        def optimizer_state(self):
            return {"state": {"embed": {}}}

    rank0, rank1 = Sharded(), Sharded()
    weights, state = _gather_for_checkpoint(rank0, main=True)
    assert list(weights) == ["embed", "norm"] and rank0.devices == ["cpu"] and state == {"state": {"embed": {}}}
    weights, _ = _gather_for_checkpoint(rank1, main=False)
    assert weights is None and rank1.taken == 2 and rank1.devices == [None]

    class Whole:
        sharded = False

    assert _gather_for_checkpoint(Whole(), main=True) == (None, None)


def test_a_resumed_torchrun_run_repeats_an_uninterrupted_one(tmp_path):
    """Two ranks, PPO (the critic is checkpointed too): three iterations in one go, and two then a resumed third."""
    whole, split = _whole_and_resumed(tmp_path, "algo=ppo")
    critics = [torch.load(run / "checkpoints" / "iter_000003" / "critic.pt") for run in (whole, split)]
    # as the policy's weights above: equal up to rounding noise (how the engine batches requests depends on timing,
    # and a padded batch's logits move by ulps with its composition; under load this once made them differ)
    assert all(torch.allclose(critics[0][k], critics[1][k], atol=1e-4) for k in critics[0])
    assert critics[0]["head.weight"].abs().sum() > 0


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
