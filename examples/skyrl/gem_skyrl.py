"""GEM envs in SkyRL: write a skyrl-train dataset, check episodes on CPU, or train.

    python examples/skyrl/gem_skyrl.py check --env game:GuessTheNumber-v0-easy --episodes 8
    python examples/skyrl/gem_skyrl.py dataset --env game:GuessTheNumber-v0-easy --out data/gem
    python examples/skyrl/gem_skyrl.py train data.train_data="['data/gem/train.jsonl']" ...   # GPU, skyrl-train

``check`` plays episodes through ``skyrl_gym.make("gem", ...)`` with gem-envs-games'
solver as the policy, calling the env the way skyrl-train's generator does, and prints
each episode's return. ``train`` is skyrl-train's own entrypoint, with the ``gem`` env
registered in the Ray worker that runs the generator.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gem_integrations.skyrl import ENV_CLASS, gem_rows, register_env


def check(env_id: str, episodes: int, max_turns: int) -> list[float]:
    """Solver-played episodes through skyrl-gym; the returns, one per episode."""
    import skyrl_gym

    from gem_envs_games.solvers import solver_for

    returns = []
    for row in gem_rows(env_id, seeds=range(episodes)):
        extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")} | {"max_turns": max_turns}
        env = skyrl_gym.make(row["env_class"], env_config={}, extras=extras)
        solver = solver_for(env.gem_env)
        solver.reset()
        chat, meta = env.init(row["prompt"])
        obs, info, done = chat[-1]["content"], meta["info"], False
        while not done:
            out = env.step(solver.act(obs, info))
            done, info = out["done"], out["metadata"]["info"]
            obs = out["observations"][-1]["content"] if out["observations"] else ""
        metrics = env.get_metrics()
        env.close()
        print(f"seed {row['seed']}: return {metrics['return']:+.3f} in {metrics['turns']} turns")
        returns.append(metrics["return"])
    print(f"mean return {sum(returns) / len(returns):+.3f} over {len(returns)} episodes")
    return returns


def write_dataset(env_id: str, out: Path, train: int, validation: int) -> None:
    """train.jsonl and validation.jsonl (disjoint seeds), as skyrl-train's PromptDataset reads them."""
    out.mkdir(parents=True, exist_ok=True)
    for name, seeds in (("train", range(train)), ("validation", range(train, train + validation))):
        with open(out / f"{name}.jsonl", "w") as f:
            for row in gem_rows(env_id, seeds):
                f.write(json.dumps(row) + "\n")
        print(f"wrote {out / f'{name}.jsonl'} ({len(seeds)} rows)")


def train(overrides: list[str]) -> None:
    """skyrl-train's PPO/GRPO entrypoint with the gem env registered in its Ray worker."""
    import hydra
    import ray
    from skyrl_train.entrypoints.main_base import BasePPOExp, config_dir
    from skyrl_train.utils import validate_cfg
    from skyrl_train.utils.utils import initialize_ray

    @ray.remote(num_cpus=1)
    def entrypoint(cfg):
        register_env()  # the worker's own skyrl-gym registry
        BasePPOExp(cfg).run()

    @hydra.main(config_path=config_dir, config_name="ppo_base_config", version_base=None)
    def main(cfg):
        validate_cfg(cfg)
        initialize_ray(cfg)
        ray.get(entrypoint.remote(cfg))

    sys.argv = [sys.argv[0], f"environment.env_class={ENV_CLASS}", *overrides]
    main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="solver episodes through skyrl_gym.make on CPU")
    c.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    c.add_argument("--episodes", type=int, default=8)
    c.add_argument("--max-turns", type=int, default=32, help="the cap skyrl-train's generator.max_turns sets")
    d = sub.add_parser("dataset", help="write train/validation JSON lines for skyrl-train")
    d.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    d.add_argument("--out", type=Path, default=Path("data/gem"))
    d.add_argument("--train", type=int, default=1024)
    d.add_argument("--validation", type=int, default=64)
    t = sub.add_parser("train", help="skyrl-train's entrypoint (GPU); the rest are its hydra overrides")
    t.add_argument("overrides", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "check":
        returns = check(args.env, args.episodes, args.max_turns)
        if min(returns) <= 0:
            sys.exit("a solver episode did not win: the env's rewards did not come through skyrl-gym")
    elif args.command == "dataset":
        write_dataset(args.env, args.out, args.train, args.validation)
    else:
        train(args.overrides)


if __name__ == "__main__":
    main()
