"""GRPO on a GEM env with verl: every sample is one multi-turn episode played by GEM's
``gem_agent`` agent loop (gem_integrations.verl), rewards from the env.

    python examples/verl/train_gem_agent.py --env game:GuessTheNumber-v0-easy --model Qwen/Qwen2.5-0.5B-Instruct

writes OUT/train.parquet and OUT/test.parquet (one row per seed, ``agent_name: gem_agent``),
OUT/agent_loops.yaml (which points verl at the loop) and runs ``python -m verl.trainer.main_ppo``
with the overrides below: vLLM async rollouts, GRPO, one GPU. ``--dry-run`` does everything
but the training run: it writes the files, composes the overrides against verl's own
config (so a renamed key fails here, on a CPU) and prints the command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

# before anything imports huggingface_hub: no run waits on the hub unless the user asked (HF_HUB_OFFLINE=0)
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def write_inputs(env_id: str, out: Path, train_seeds: int, test_seeds: int) -> None:
    import pandas as pd

    from gem_integrations.verl import gem_rows

    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(gem_rows(env_id, range(train_seeds))).to_parquet(out / "train.parquet")
    pd.DataFrame(gem_rows(env_id, range(train_seeds, train_seeds + test_seeds))).to_parquet(out / "test.parquet")
    # verl's agent-loop workers read this file and instantiate the loop by name
    (out / "agent_loops.yaml").write_text("- name: gem_agent\n  _target_: gem_integrations.verl.GemAgentLoop\n")


def overrides(args: argparse.Namespace, out: Path) -> list[str]:
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={out / 'train.parquet'}",
        f"data.val_files={out / 'test.parquet'}",
        f"data.train_batch_size={args.batch_size}",
        "data.max_prompt_length=1024",
        f"data.max_response_length={args.max_response_length}",
        "data.return_raw_chat=True",
        f"actor_rollout_ref.model.path={args.model}",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.batch_size}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={args.group_size}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={out / 'agent_loops.yaml'}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=gem_agent",
        "actor_rollout_ref.rollout.agent.num_workers=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        "trainer.logger=[console]",
        "trainer.val_before_train=False",
        f"trainer.n_gpus_per_node={args.gpus}",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={args.steps}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        "trainer.project_name=gem",
        "trainer.experiment_name=gem_agent",
    ]


def compose(overrides_: list[str]) -> None:
    """Compose the overrides against verl's ppo_trainer config: unknown keys fail here."""
    from importlib.resources import files

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = str(files("verl.trainer") / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = hydra_compose(config_name="ppo_trainer", overrides=overrides_)
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "gem_agent"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a local folder or hub id")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="seeds (GRPO groups) per step")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per seed")
    parser.add_argument("--max-response-length", type=int, default=1024, help="tokens per episode, env text included")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--out", default="runs/verl-example")
    parser.add_argument("--dry-run", action="store_true", help="write the inputs, check the config, print the command")
    args = parser.parse_args()
    out = Path(args.out).resolve()

    write_inputs(args.env, out, train_seeds=args.steps * args.batch_size, test_seeds=args.batch_size)
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides(args, out)]
    compose(command[3:])
    print(" ".join(command[:3]), *command[3:], sep=" \\\n  ")
    if not args.dry_run:
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
