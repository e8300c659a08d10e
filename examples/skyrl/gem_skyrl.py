"""GEM envs in SkyRL: write a skyrl-train dataset, check episodes on CPU, dry-run a recipe, or train.

    python examples/skyrl/gem_skyrl.py check --env game:GuessTheNumber-v0-easy --episodes 8
    python examples/skyrl/gem_skyrl.py dataset --env game:GuessTheNumber-v0-easy --out data/gem
    python examples/skyrl/gem_skyrl.py dry-run --recipe examples/skyrl/recipes/game_rebn_qwen3_1.7b_1node.yaml
    python examples/skyrl/gem_skyrl.py train --recipe examples/skyrl/recipes/game_rebn_qwen3_1.7b_1node.yaml  # GPUs

``check`` plays episodes through ``skyrl_gym.make("gem", ...)`` with gem-envs-games'
solver as the policy, calling the env the way skyrl-train's generator does, and prints
each episode's return. ``dry-run`` builds skyrl-train's real trainer config from a recipe
(its hydra config, the recipe's overrides, ``validate_cfg``) and checks it, then plays one
step of the recipe's offline check env through a dataset row; it loads no model and starts
no Ray. ``train`` is skyrl-train's own entrypoint with gem's experiment
(``gem_integrations.skyrl.gem_ppo_exp``: the ``gem`` env and the ``gem_rebn`` estimator
registered in the Ray worker, and the trainer that hands ``gem_rebn`` the loss mask).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from gem_integrations.skyrl import ENV_CLASS, REBN_ESTIMATOR, check_rebn_config, gem_ppo_exp, gem_rows


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


def write_dataset(env_id: str, out: Path, train: int, validation: int, wrappers: str | None = None) -> None:
    """train.jsonl and validation.jsonl (disjoint seeds), as skyrl-train's PromptDataset reads them."""
    out.mkdir(parents=True, exist_ok=True)
    for name, seeds in (("train", range(train)), ("validation", range(train, train + validation))):
        with open(out / f"{name}.jsonl", "w") as f:
            for row in gem_rows(env_id, seeds, wrappers=wrappers):
                f.write(json.dumps(row) + "\n")
        print(f"wrote {out / f'{name}.jsonl'} ({len(seeds)} rows)")


def load_recipe(path: Path) -> dict[str, Any]:
    """A recipe: the GEM env (and wrappers), its dataset, the cluster shape and skyrl-train's hydra overrides."""
    import yaml

    recipe = yaml.safe_load(path.read_text())
    missing = {"env", "check_env", "dataset", "nodes", "gpus_per_node", "overrides"} - set(recipe)
    if missing:
        sys.exit(f"{path}: the recipe lacks {sorted(missing)}")
    return recipe


def recipe_overrides(recipe: dict[str, Any], data_dir: str | None = None) -> list[str]:
    """The recipe's overrides, with gem's env class and the recipe's dataset files (or ``data_dir``'s)."""
    data = data_dir or recipe["dataset"]["out"]
    return [f"environment.env_class={ENV_CLASS}", f"data.train_data=['{data}/train.jsonl']",
            f"data.val_data=['{data}/validation.jsonl']", *recipe["overrides"]]


def compose(overrides: list[str]) -> Any:
    """skyrl-train's own trainer config (ppo_base_config and its defaults) with the overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from skyrl_train.entrypoints.main_base import config_dir

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name="ppo_base_config", overrides=overrides)


def dry_run(path: Path) -> None:
    """Build the recipe's real skyrl-train config, validate it as skyrl-train does, check what the
    recipe promises, and play one step of the check env through a dataset row; no model, no Ray."""
    import skyrl_gym
    from skyrl_train.utils import validate_cfg

    recipe = load_recipe(path)
    with tempfile.TemporaryDirectory() as tmp:
        write_dataset(recipe["check_env"], Path(tmp), train=2, validation=1, wrappers=recipe.get("wrappers"))
        cfg = compose(recipe_overrides(recipe, tmp))
        validate_cfg(cfg)  # skyrl-train's batch sizes, placement, generator and registry checks
        check_rebn_config(cfg)
        alg, place, gen = cfg.trainer.algorithm, cfg.trainer.placement, cfg.generator
        problems = []
        if alg.advantage_estimator != recipe.get("estimator", REBN_ESTIMATOR):
            problems.append(f"advantage_estimator {alg.advantage_estimator}")
        if "gamma" in recipe and alg.gamma != recipe["gamma"]:
            problems.append(f"gamma {alg.gamma} != {recipe['gamma']}")
        if (place.policy_num_nodes, place.policy_num_gpus_per_node) != (recipe["nodes"], recipe["gpus_per_node"]):
            problems.append(f"policy placement {place.policy_num_nodes}x{place.policy_num_gpus_per_node}")
        if gen.max_turns < recipe.get("max_turns", 1):
            problems.append(f"generator.max_turns {gen.max_turns} < the env's {recipe['max_turns']} turns")
        if problems:
            sys.exit(f"{path}: {'; '.join(problems)}")
        # one step of the check env, built from a dataset row as skyrl-train's generator builds it
        row = json.loads((Path(tmp) / "train.jsonl").read_text().splitlines()[0])
        extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")} | {"max_turns": gen.max_turns}
        env = skyrl_gym.make(cfg.environment.env_class, env_config=cfg.environment.skyrl_gym.get(ENV_CLASS, {}),
                             extras=extras)
        env.init(row["prompt"])
        out = env.step("\\boxed{0}")
        env.close()
    print(f"{path.name}: skyrl-train config valid; {recipe['nodes']} node(s) x {recipe['gpus_per_node']} GPUs, "
          f"{alg.advantage_estimator} (gamma {alg.gamma}), model {cfg.trainer.policy.model.path}, "
          f"max_turns {gen.max_turns}; {recipe['check_env']} stepped (reward {out['reward']:+.2f})")


def train(overrides: list[str]) -> None:
    """skyrl-train's entrypoint running gem's experiment in a Ray worker."""
    import hydra
    import ray
    from skyrl_train.entrypoints.main_base import config_dir
    from skyrl_train.utils import validate_cfg
    from skyrl_train.utils.utils import initialize_ray

    @ray.remote(num_cpus=1)
    def entrypoint(cfg):
        gem_ppo_exp()(cfg).run()  # registers the gem env and gem_rebn in this worker

    @hydra.main(config_path=config_dir, config_name="ppo_base_config", version_base=None)
    def main(cfg):
        validate_cfg(cfg)
        check_rebn_config(cfg)
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
    d.add_argument("--recipe", type=Path, help="take the env, wrappers and sizes from a recipe")
    d.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    d.add_argument("--wrappers", default=None, help="GEM wrapper names, e.g. python_tool")
    d.add_argument("--out", type=Path, default=Path("data/gem"))
    d.add_argument("--train", type=int, default=1024)
    d.add_argument("--validation", type=int, default=64)
    r = sub.add_parser("dry-run", help="build and check a recipe's skyrl-train config on CPU")
    r.add_argument("--recipe", type=Path, required=True)
    t = sub.add_parser("train", help="skyrl-train's entrypoint (GPU); the rest are its hydra overrides")
    t.add_argument("--recipe", type=Path, help="a recipe's overrides first (the rest override them)")
    t.add_argument("overrides", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "check":
        returns = check(args.env, args.episodes, args.max_turns)
        if min(returns) <= 0:
            sys.exit("a solver episode did not win: the env's rewards did not come through skyrl-gym")
    elif args.command == "dataset":
        if args.recipe:
            recipe = load_recipe(args.recipe)
            size = recipe["dataset"]
            write_dataset(recipe["env"], Path(size["out"]), size["train"], size["validation"], recipe.get("wrappers"))
        else:
            write_dataset(args.env, args.out, args.train, args.validation, args.wrappers)
    elif args.command == "dry-run":
        dry_run(args.recipe)
    else:
        train((recipe_overrides(load_recipe(args.recipe)) if args.recipe else []) + args.overrides)


if __name__ == "__main__":
    main()
