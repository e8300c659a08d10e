"""GRPO on a GEM env with OpenRLHF's multi-turn agent training.

This one file is both halves of the job:

- imported by OpenRLHF (``--train.agent_func_path examples/openrlhf/gem_agent.py``), it
  defines the ``AgentExecutor`` OpenRLHF builds: GEM's adapter over the env named by
  ``GEM_ENV`` (default game:GuessTheNumber-v0-easy);
- run as a script, it writes the prompt dataset (one row per seed; the label is the
  seed) and starts ``openrlhf.cli.train_ppo_ray`` on one GPU, or ``--nodes`` nodes of
  ``--gpus-per-node`` GPUs of a Ray cluster (``--dry-run``: only writes the dataset and
  prints the command)::

    python examples/openrlhf/gem_agent.py --model Qwen/Qwen2.5-0.5B-Instruct
    python examples/openrlhf/gem_agent.py --model /models/Qwen3-4B-Base --nodes 2 --gpus-per-node 8 --env-host ray

``--env-host ray`` steps the envs in Ray actors spread over the cluster's nodes (GEM's host,
each step bounded by ``--step-timeout`` seconds) instead of in OpenRLHF's vLLM workers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    # before anything imports huggingface_hub: no run waits on the hub unless the user asked (HF_HUB_OFFLINE=0);
    # only as a script, so that the file leaves alone the OpenRLHF processes that import it
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gem_integrations.openrlhf import agent_executor

ENV_ID = os.environ.get("GEM_ENV", "game:GuessTheNumber-v0-easy")

# the script hands its options to the OpenRLHF processes that import this file through the environment
AgentExecutor = agent_executor(ENV_ID, env_host=os.environ.get("GEM_ENV_HOST", "thread"),
                               step_timeout=float(os.environ.get("GEM_STEP_TIMEOUT", "300")))


def write_dataset(path: Path, seeds: range) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for seed in seeds:
            # the prompt is replaced by the env's first observation; the label carries the seed
            f.write(json.dumps({"prompt": f"{ENV_ID} seed {seed}", "label": str(seed)}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct")
    parser.add_argument("--episodes", type=int, default=1, help="passes over the dataset")
    parser.add_argument("--seeds", type=int, default=256)
    parser.add_argument("--out", default="runs/openrlhf-example")
    parser.add_argument("--nodes", type=int, default=1, help="nodes of the Ray cluster to train on")
    parser.add_argument("--gpus-per-node", type=int, default=1)
    parser.add_argument("--env-host", choices=("thread", "process", "ray"), default="thread",
                        help="where the envs step (ray: actors across the cluster's nodes)")
    parser.add_argument("--step-timeout", type=float, default=300.0,
                        help="seconds a reset or step may take before its episode ends")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    gpus = args.nodes * args.gpus_per_node
    out = Path(args.out).resolve()
    write_dataset(out / "prompts.jsonl", range(args.seeds))
    command = [
        sys.executable, "-m", "openrlhf.cli.train_ppo_ray",
        "--train.agent_func_path", str(Path(__file__).resolve()),
        "--data.prompt_dataset", str(out / "prompts.jsonl"),
        "--data.input_key", "prompt", "--data.label_key", "label",
        "--actor.model_name_or_path", args.model,
        "--algo.advantage.estimator", "group_norm",
        "--rollout.n_samples_per_prompt", "4",
        "--rollout.batch_size", "16", "--train.batch_size", "64",
        "--rollout.max_new_tokens", "256", "--data.max_len", "2048",
        "--rollout.temperature", "1.0",
        # one vLLM engine per GPU, colocated with the actor's shards
        "--vllm.num_engines", str(gpus), "--vllm.tensor_parallel_size", "1", "--vllm.gpu_memory_utilization", "0.5",
        "--actor.num_nodes", str(args.nodes), "--actor.num_gpus_per_node", str(args.gpus_per_node),
        "--train.num_episodes", str(args.episodes),
        "--ckpt.output_dir", str(out / "checkpoints"),
    ]
    print(" ".join(command[:3]), *command[3:], sep=" \\\n  ")
    if not args.dry_run:
        subprocess.run(command, check=True, env={**os.environ, "GEM_ENV": ENV_ID, "GEM_ENV_HOST": args.env_host,
                                                 "GEM_STEP_TIMEOUT": str(args.step_timeout)})


if __name__ == "__main__":
    main()
