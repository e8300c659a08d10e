"""Every constructor argument of the reference package's classes (PyPI ``gem-llm``, read
from its source at axon-rl/gem 4069f2f) is one our class, reached through the compat
table, accepts by name: a script written for the reference never stops at a TypeError.

The reference is not installed here, so its parameter names are written down below. A
class whose suite is not installed is skipped (gem-core's tests run alone too)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

import gem

#: reference "module:Class" -> its constructor's parameters, in order (self left out)
# fmt: off
REFERENCE: dict[str, tuple[str, ...]] = {
    # games (gem/envs/game_env/*)
    "gem.envs.game_env.guess_the_number:GuessTheNumberEnv": ("min_number", "max_number", "max_turns"),
    "gem.envs.game_env.mastermind:MastermindEnv": ("code_length", "num_numbers", "duplicate_numbers", "max_turns"),
    "gem.envs.game_env.minesweeper:MinesweeperEnv": ("rows", "cols", "num_mines", "max_turns"),
    "gem.envs.game_env.wordle:WordleEnv": ("word_length", "only_real_words", "max_turns"),
    "gem.envs.game_env.hangman:HangmanEnv": ("word_length", "hardcore", "max_turns"),
    "gem.envs.game_env.word_search:WordSearchEnv": ("hardcore", "max_turns", "num_words"),
    "gem.envs.game_env.crosswords:CrosswordsEnv": ("hardcore", "max_turns", "num_words"),
    "gem.envs.game_env.fifteen_puzzle:FifteenPuzzleEnv": ("max_turns", "num_rows", "init_algo", "mc_rand_moves"),
    "gem.envs.game_env.sudoku:SudokuEnv": ("clues", "max_turns", "scale"),
    "gem.envs.game_env.tower_of_hanoi:TowerofHanoiEnv": ("num_disks", "max_turns"),
    "gem.envs.game_env.game_2048:Game2048Env": ("target_tile", "max_turns", "board_size"),
    "gem.envs.game_env.sokoban:SokobanEnv": ("dim_room", "max_turns", "num_boxes"),
    "gem.envs.game_env.wikigame:WikiGameEnv": (
        "max_turns", "backend", "trawler_kwargs", "page_summary_length", "variant",
    ),
    # math, reasoning gym, code, QA
    "gem.envs.math_env:MathEnv": (
        "dataset_name", "split", "dataset", "question_key", "answer_key", "use_format_error_reward", "seed", "use_mp",
    ),
    "gem.envs.reasoning_gym:ReasoningGymEnv": ("name", "size", "seed"),
    "gem.envs.code_env:CodeEnv": (
        "dataset_name", "split", "dataset", "question_key", "test_key", "seed", "max_workers", "max_tests",
        "verbose", "sandbox_type",
    ),
    "gem.envs.qa_env:QaEnv": (
        "dataset_name", "split", "dataset", "question_key", "answer_key", "seed", "extract_boxed",
        "load_from_cache_file",
    ),
    # multi-agent
    "gem.envs.multiagent.multi_agent_env:MultiAgentEnv": (),
    "gem.envs.multiagent.multi_agent_env:AgentSelector": ("agents", "mode"),
    # tools (gem/tools/*.py)
    "gem.tools.base_tool:BaseTool": ("num_workers",),
    "gem.tools.python_code_tool:PythonCodeTool": ("timeout", "sandbox_type", "keep_error_last_line"),
    "gem.tools.search_tool:SearchTool": ("num_workers", "search_url", "topk", "timeout"),
    "gem.tools.mcp_tool:MCPTool": (
        "config", "auth", "headers", "log_handler", "progress_handler", "sampling_handler", "max_retries",
        "delay_between_retries", "execution_timeout", "validate_on_init", "num_workers",
    ),
    "gem.tools.tool_env_wrapper:ToolEnvWrapper": (
        "env", "tools", "tool_reward", "tool_success_reward", "tool_execute_error_reward", "max_tool_uses",
    ),
    # wrappers (gem/wrappers/*), the core wrapper and the vector envs
    "gem.wrappers.observation_wrapper:ObservationWrapper": (
        "env", "include_action", "include_chat_template", "apply_chat_template_on_reset", "max_history_length",
        "tokenizer",
    ),
    "gem.wrappers.episode_tracking_wrapper:EpisodeTrackingWrapper": ("env",),
    "gem.core:EnvWrapper": ("env",),
    "gem.vector.vector_env:VectorEnv": ("env_ids", "env_fns", "autoreset_mode"),
    "gem.vector.sync_vector_env:SyncVectorEnv": ("env_ids", "env_fns", "autoreset_mode"),
    "gem.vector.async_vector_env:AsyncVectorEnv": ("env_ids", "env_fns", "autoreset_mode"),
}
# fmt: on

#: classes whose leading positional parameters differ from the reference's, and why
#: (checked by keyword above; positional calls beyond the shared prefix differ)
POSITIONAL_DIFFERENCES: dict[str, str] = {
    "gem.envs.math_env:MathEnv": "dataset= is keyword-only (one of several sources)",
    "gem.envs.qa_env:QaEnv": "dataset= is keyword-only (one of several sources)",
    "gem.envs.code_env:CodeEnv": "the first positional is our packaged source; the reference's are keyword-only",
    "gem.tools.mcp_tool:MCPTool": "the second positional is command= (a stdio server); auth= is keyword-only",
    "gem.vector.vector_env:VectorEnv": "env_fns comes first; the reference's own make_vec passes both by keyword",
    "gem.vector.sync_vector_env:SyncVectorEnv": "as VectorEnv",
    "gem.vector.async_vector_env:AsyncVectorEnv": "as VectorEnv",
}


#: classes whose trailing reference parameters are keyword-only here (still accepted by name)
NAMED_ONLY_TAIL = {
    "gem.envs.reasoning_gym:ReasoningGymEnv",  # seed= comes through gem.core's constructor seed
    "gem.tools.base_tool:BaseTool",
}


def _resolve(path: str) -> Any:
    module, name = path.split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:  # a suite or an optional extra that is not installed
        pytest.skip(f"{path}: {exc}")


def _named_parameters(cls: Any) -> set[str]:
    """The names ``cls(...)`` takes explicitly: its own ``__init__``'s and, where that
    forwards ``**kwargs``, those of the base classes it forwards to."""
    names: set[str] = set()
    if not isinstance(cls, type):  # a factory function standing in for a class
        params = inspect.signature(cls).parameters.values()
        return {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    if issubclass(cls, gem.Env) and cls._takes_ctor_seed:
        names.add("seed")  # every env takes the reference's seed= (gem.core)
    return names - {"self"}


@pytest.mark.parametrize("path", sorted(REFERENCE))
def test_every_reference_argument_is_accepted_by_name(path: str) -> None:
    cls = _resolve(path)
    signature = inspect.signature(cls)
    missing = [name for name in REFERENCE[path] if name not in _named_parameters(cls)]
    assert not missing, f"{path} ({cls.__module__}.{cls.__qualname__}) does not take {missing}"
    signature.bind_partial(**dict.fromkeys(REFERENCE[path]))


@pytest.mark.parametrize("path", sorted(set(REFERENCE) - set(POSITIONAL_DIFFERENCES)))
def test_positional_order_is_the_references(path: str) -> None:
    cls = _resolve(path)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ours = [p.name for p in inspect.signature(cls).parameters.values() if p.kind in kinds]
    reference = list(REFERENCE[path])
    shared = min(len(ours), len(reference))
    assert ours[:shared] == reference[:shared], f"{path}: ours {ours}, the reference's {reference}"
    assert len(ours) >= len(reference) or path in NAMED_ONLY_TAIL, f"{path}: ours {ours}, the reference's {reference}"


def test_the_table_reaches_every_class_listed() -> None:
    from gem.compat import provider, rows
    from gem.errors import distribution_installed

    table = rows()
    for path in REFERENCE:
        module, name = path.split(":")
        if module in ("gem.core",) or module.startswith("gem.vector."):
            continue  # real modules of ours
        owner = provider(module)
        if owner is not None and not distribution_installed(owner.partition("[")[0]):
            continue  # its package maps it, and is not installed here (the nox suites session has them all)
        assert name in (table.get(module) or {}), f"{path} is in no package's gem_register_compat rows"
