"""The one table from the reference package's module paths to our objects.

A script written for the reference GEM package (PyPI ``gem-llm``) imports names such as
``gem.envs.registration.make`` or ``gem.tools.python_code_tool.PythonCodeTool``. Each key
below is such a module path; its value maps the names that module offers to
``"our.module:attribute"``, or is one string naming the module of ours that stands in for
the whole module (its private helpers included). :mod:`gem.compat` turns the keys into
modules on first import and resolves each name on first access, so ``import gem`` imports
no suite. Packages above the keys (``gem.envs``, ``gem.tools``, ``gem.utils``, ...) exist
because the keys below them do.

Our own paths (``gem``, ``gem_envs_games``, ``gem_tools``, ...) are the primary API; this
table is only the bridge.
"""

from __future__ import annotations

_GAMES = "gem_envs_games"

#: reference module path -> {name: "our.module:attr"}, or "our.module" for a whole module
TABLE: dict[str, dict[str, str] | str] = {
    "gem.__about__": {"__version__": "gem:__version__"},
    # -- envs ------------------------------------------------------------------------
    "gem.envs.registration": {
        "ENV_REGISTRY": "gem.registration:ENV_REGISTRY",
        "EnvSpec": "gem.registry:EnvSpec",
        "register": "gem.registration:register",
        "make": "gem.registration:make",
        "make_vec": "gem.registration:make_vec",
        "print_envs": "gem.registration:print_envs",
    },
    "gem.envs.game_env.guess_the_number": {"GuessTheNumberEnv": f"{_GAMES}.guess_the_number:GuessTheNumberEnv"},
    "gem.envs.game_env.mastermind": {"MastermindEnv": f"{_GAMES}.mastermind:MastermindEnv"},
    "gem.envs.game_env.minesweeper": {"MinesweeperEnv": f"{_GAMES}.minesweeper:MinesweeperEnv"},
    "gem.envs.game_env.wordle": {"WordleEnv": f"{_GAMES}.wordle:WordleEnv"},
    "gem.envs.game_env.hangman": {"HangmanEnv": f"{_GAMES}.hangman:HangmanEnv"},
    "gem.envs.game_env.word_search": {"WordSearchEnv": f"{_GAMES}.word_search:WordSearchEnv"},
    "gem.envs.game_env.fifteen_puzzle": {"FifteenPuzzleEnv": f"{_GAMES}.fifteen_puzzle:FifteenPuzzleEnv"},
    "gem.envs.game_env.sudoku": {"SudokuEnv": f"{_GAMES}.sudoku:SudokuEnv"},
    "gem.envs.game_env.tower_of_hanoi": {"TowerofHanoiEnv": f"{_GAMES}.tower_of_hanoi:TowerofHanoiEnv"},
    "gem.envs.game_env.game_2048": {"Game2048Env": f"{_GAMES}.game2048:Game2048Env"},
    "gem.envs.game_env.crosswords": {"CrosswordsEnv": f"{_GAMES}.crosswords:CrosswordsEnv"},
    "gem.envs.game_env.crosswords.crosswords": {"CrosswordsEnv": f"{_GAMES}.crosswords:CrosswordsEnv"},
    "gem.envs.game_env.sokoban": {"SokobanEnv": f"{_GAMES}.sokoban:SokobanEnv"},
    "gem.envs.game_env.sokoban.sokoban": {"SokobanEnv": f"{_GAMES}.sokoban:SokobanEnv"},
    "gem.envs.game_env.wikigame": {"WikiGameEnv": f"{_GAMES}.wikigame:WikiGameEnv"},
    "gem.envs.game_env.wikigame.wikigame": {"WikiGameEnv": f"{_GAMES}.wikigame:WikiGameEnv"},
    # the reference's multi-agent package lives under gem.envs; ours is gem.multiagent
    "gem.envs.multiagent": {
        "MultiAgentEnv": "gem.multiagent:MultiAgentEnv",
        "AgentSelector": "gem.multiagent:AgentSelector",
    },
    "gem.envs.multiagent.multi_agent_env": {
        "MultiAgentEnv": "gem.multiagent:MultiAgentEnv",
        "AgentSelector": "gem.multiagent:AgentSelector",
    },
    "gem.envs.math_env": {
        "MathEnv": "gem_envs_math.env:MathEnv",
        "TERMINAL_STATE": "gem.core:TERMINAL_STATE",
    },
    "gem.envs.code_env": {"CodeEnv": "gem_envs_code.env:CodeEnv"},
    "gem.envs.qa_env": {"QaEnv": "gem_envs_qa.env:QaEnv"},
    "gem.envs.reasoning_gym": {"ReasoningGymEnv": "gem_envs_math.rg_env:ReasoningGymEnv"},
    # -- tools -----------------------------------------------------------------------
    "gem.tools.base_tool": {"BaseTool": "gem_tools.base:ReferenceTool"},
    "gem.tools.python_code_tool": {"PythonCodeTool": "gem_tools.python_tool:PythonCodeTool"},
    "gem.tools.search_tool": {"SearchTool": "gem_tools.search:SearchTool"},
    "gem.tools.mcp_tool": {"MCPTool": "gem_tools.mcp_tool:MCPTool"},
    "gem.tools.tool_env_wrapper": {"ToolEnvWrapper": "gem_tools.wrapper:ToolEnvWrapper"},
    "gem.tools.mcp_server.time_mcp": "gem_tools.mcp_servers.time_server",
    # -- utils -----------------------------------------------------------------------
    "gem.utils.parsing": {
        "extract_last_boxed_answer": "gem.compat.reference_api:extract_last_boxed_answer",
        "extract_last_tagged_answer": "gem.compat.reference_api:extract_last_tagged_answer",
        "extract_code_from_model": "gem.compat.reference_api:extract_code_from_model",
    },
    "gem.utils.constants": {
        "TERMINAL_STATE": "gem.core:TERMINAL_STATE",
        "LanguageGameReward": "gem.compat.reference_api:LanguageGameReward",
    },
    "gem.utils.debug": {
        "ppprint": "gem.compat.debug:ppprint",
        "run_and_print_episode": "gem.compat.debug:run_and_print_episode",
        "run_and_print_episode_async": "gem.compat.debug:run_and_print_episode_async",
        "run_and_print_episode_with_selective_step": "gem.compat.debug:run_and_print_episode_with_selective_step",
        "run_and_print_episode_with_random_selection": "gem.compat.debug:run_and_print_episode_with_selective_step",
    },
    "gem.utils.seeding": {
        "np_random": "gem.seeding:np_random",
        "set_seed": "gem.seeding:set_global_seed",
        "RNG": "numpy.random:Generator",
        "RandomNumberGenerator": "numpy.random:Generator",
    },
    "gem.utils.qa_em": {
        "normalize_answer": "gem_envs_qa.metrics:normalize_answer",
        "em_check": "gem_envs_qa.metrics:exact_match",
    },
    "gem.utils.math_grader": {
        "extract_answer": "gem_envs_math.extract:extract_final_answer",
        "extract_boxed_answer": "gem_envs_math.extract:last_boxed",
        "grade": "gem_envs_math.reference_api:grade",
        "boxed_reward_fn": "gem_envs_math.reference_api:boxed_reward_fn",
    },
    "gem.utils.sandbox": {"run_python": "gem_tools.reference_api:run_python"},
    # -- wrappers (gem.wrappers is a real package: these add the reference's submodules)
    "gem.wrappers.wrapper_factory": {
        "WRAPPER_FACTORY": "gem.wrappers:WRAPPER_FACTORY",
        "TOKENIZER_REQUIRED": "gem.wrappers:TOKENIZER_REQUIRED",
        "get_wrapper_fns": "gem.wrappers:get_wrapper_fns",
    },
    "gem.wrappers.observation_wrapper": {
        "ObservationWrapper": "gem.wrappers.history:ObservationWrapper",
        "WrapperObsType": "gem.core:ObsType",
    },
    "gem.wrappers.episode_tracking_wrapper": {"EpisodeTrackingWrapper": "gem.wrappers.episode:EpisodeTrackingWrapper"},
    # -- vector (gem.vector is a real package too) -------------------------------------
    "gem.vector.vector_env": {
        "VectorEnv": "gem.vector.base:VectorEnv",
        "AutoresetMode": "gem.vector.slot:AutoresetMode",
        "ArrayType": "gem.core:ArrayType",
    },
    "gem.vector.sync_vector_env": {"SyncVectorEnv": "gem.vector.local:SyncVectorEnv"},
    "gem.vector.async_vector_env": {"AsyncVectorEnv": "gem.vector.local:ThreadVectorEnv"},
}

#: top-level packages our targets live in -> what to install for them, from a clone
INSTALL: dict[str, str] = {
    "gem_envs_games": "gem-envs-games",
    "gem_envs_math": "gem-envs-math",
    "reasoning_gym": "gem-envs-math[reasoning-gym]",
    "gem_envs_code": "gem-envs-code",
    "gem_envs_qa": "gem-envs-qa",
    "gem_tools": "gem-tools",
    "mcp": "gem-tools[mcp]",
}

#: modules that need a package beyond their targets' own (an optional extra)
EXTRA_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "gem.envs.reasoning_gym": ("reasoning_gym",),
    "gem.tools.mcp_tool": ("mcp",),
    "gem.tools.mcp_server.time_mcp": ("mcp",),
}
