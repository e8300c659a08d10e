"""GRPO or ReBN on a GEM env with verl: every sample is one multi-turn episode played by GEM's
``gem_agent`` agent loop (gem_integrations.verl), each turn's reward from the env on that turn's tokens.

    python examples/verl/train_gem_agent.py --env game:GuessTheNumber-v0-easy --model Qwen/Qwen2.5-0.5B-Instruct
    python examples/verl/train_gem_agent.py --recipe examples/verl/recipes/game_rebn.yaml \
        --recipe examples/verl/recipes/qwen3_1.7b_1node.yaml --model /models/Qwen3-1.7B-Base

writes OUT/train.parquet and OUT/test.parquet (one row per seed, ``agent_name: gem_agent``),
OUT/agent_loops.yaml (which points verl at the loop) and runs ``python -m verl.trainer.main_ppo``
with the overrides below: vLLM async rollouts, GRPO, one GPU; each ``--recipe`` file (later ones
win) sets the env and replaces or adds overrides (recipes/: ReBN on a game, math behind the python
tool; one node, two nodes). ``--dry-run`` does everything but the training run: it writes the
files, composes the overrides against verl's own config and runs verl's own config validation
(so a renamed key or a batch size the GPUs cannot split fails here, on a CPU), checks that the
advantage estimator resolves in verl's registry the way the trainer resolves it, and prints the command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

# before anything imports huggingface_hub: no run waits on the hub unless the user asked (HF_HUB_OFFLINE=0)
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def write_inputs(env_id: str, out: Path, train_seeds: int, test_seeds: int, wrappers: str | None = None) -> None:
    import pandas as pd

    from gem_integrations.verl import gem_rows

    out.mkdir(parents=True, exist_ok=True)
    train, test = range(train_seeds), range(train_seeds, train_seeds + test_seeds)
    pd.DataFrame(gem_rows(env_id, train, wrappers=wrappers)).to_parquet(out / "train.parquet")
    pd.DataFrame(gem_rows(env_id, test, wrappers=wrappers)).to_parquet(out / "test.parquet")
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
        f"trainer.nnodes={args.nnodes}",
        f"trainer.total_training_steps={args.steps}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        "trainer.project_name=gem",
        "trainer.experiment_name=gem_agent",
    ]


def load_recipes(paths: list[str]) -> dict:
    """The recipe files merged in order: ``env``, ``wrappers``, ``model``, ``steps``, ``batch_size``,
    ``group_size``, ``max_response_length``, ``gpus`` (the command-line options' names) and ``overrides``,
    a mapping of verl config keys to values."""
    from omegaconf import OmegaConf

    merged: dict = {"overrides": {}}
    for path in paths:
        recipe = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
        merged["overrides"].update(recipe.pop("overrides", None) or {})
        merged.update(recipe)
    return merged


def merge_overrides(base: list[str], extra: dict) -> list[str]:
    """``key=value`` overrides, ``extra``'s replacing ``base``'s on the same key (Hydra takes a key once)."""
    merged = dict(item.split("=", 1) for item in base)
    for key, value in extra.items():
        merged[key] = _hydra_value(value)
    return [f"{key}={value}" for key, value in merged.items()]


def _hydra_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    return "null" if value is None else str(value)


def compose(overrides_: list[str]):
    """Compose the overrides against verl's ppo_trainer config and run the checks verl's main_ppo runs
    before it starts Ray: unknown keys, batch sizes the GPUs cannot split, an estimator verl cannot find."""
    from importlib.resources import files

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from verl.trainer.ppo.core_algos import AdvantageEstimator, get_adv_estimator_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.import_utils import import_external_libs

    config_dir = str(files("verl.trainer") / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = hydra_compose(config_name="ppo_trainer", overrides=overrides_)
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "gem_agent"
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    # verl's trainer process knows its own estimators and those that model.external_lib's import registers
    # (its HFModelConfig imports it); anything this script imported does not count
    name = cfg.algorithm.adv_estimator
    if name not in {e.value for e in AdvantageEstimator}:
        libs = cfg.actor_rollout_ref.model.get("external_lib") or None
        import_external_libs(libs)
        module = get_adv_estimator_fn(name).__module__
        if module not in ([libs] if isinstance(libs, str) else list(libs or [])):
            raise SystemExit(f"algorithm.adv_estimator={name} is registered by {module}: verl's trainer finds it only "
                             f"with actor_rollout_ref.model.external_lib={module}")
    return cfg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    parser.add_argument("--wrappers", default=None, help="GEM wrapper names around the env, e.g. python_tool")
    parser.add_argument("--nnodes", type=int, default=1, help="nodes of --gpus GPUs each (a Ray cluster)")
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a local folder or hub id")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="seeds (GRPO groups) per step")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per seed")
    parser.add_argument("--max-response-length", type=int, default=1024, help="tokens per episode, env text included")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--out", default="runs/verl-example")
    parser.add_argument("--recipe", action="append", default=[], help="a recipe file (recipes/); repeat to combine")
    parser.add_argument("--dry-run", action="store_true", help="write the inputs, check the config, print the command")
    args = parser.parse_args()
    # a recipe sets the defaults; an option given on the command line still wins
    recipe = load_recipes(args.recipe)
    unknown = set(recipe) - {"overrides"} - {action.dest for action in parser._actions}
    if unknown:
        parser.error(f"unknown recipe keys {sorted(unknown)} in {args.recipe}")
    parser.set_defaults(**{k.replace("-", "_"): v for k, v in recipe.items() if k != "overrides"})
    args = parser.parse_args()
    out = Path(args.out).resolve()

    write_inputs(args.env, out, train_seeds=args.steps * args.batch_size, test_seeds=args.batch_size,
                 wrappers=args.wrappers)
    command = [sys.executable, "-m", "verl.trainer.main_ppo",
               *merge_overrides(overrides(args, out), recipe["overrides"])]
    compose(command[3:])
    print(" ".join(command[:3]), *command[3:], sep=" \\\n  ")
    if not args.dry_run:
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
