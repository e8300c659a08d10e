"""gem-core's rows of the reference-path table, and where every other row comes from.

A script written for the reference GEM package (PyPI ``gem-llm``) imports names such as
``gem.envs.registration.make`` or ``gem.tools.python_code_tool.PythonCodeTool``. Each
package maps the reference paths of the objects it holds through the
``gem_register_compat`` hook (:mod:`gem.compat.rows`); these are gem-core's, registered as
part of gem-core's own plugin. :mod:`gem.compat` turns the paths into modules on first import and resolves
each name on first access.

Our own paths (``gem``, ``gem_envs_games``, ``gem_tools``, ...) are the primary API; the
table is only the bridge.
"""

from __future__ import annotations

#: reference module path -> {name: "our.module:attr"}, or "our.module" for a whole module
CORE_ROWS: dict[str, dict[str, str] | str] = {
    "gem.__about__": {"__version__": "gem._version:__version__"},
    # -- envs ------------------------------------------------------------------------
    "gem.envs.registration": {
        "ENV_REGISTRY": "gem.compat.shims:ENV_REGISTRY",
        "EnvSpec": "gem.registry:EnvSpec",
        "register": "gem.registration:register",
        "make": "gem.registration:make",
        "make_vec": "gem.registration:make_vec",
        "print_envs": "gem.registration:print_envs",
    },
    # the reference's multi-agent package lives under gem.envs; ours is gem.multiagent
    "gem.envs.multiagent": {
        "MultiAgentEnv": "gem.multiagent:MultiAgentEnv",
        "AgentSelector": "gem.multiagent:AgentSelector",
    },
    "gem.envs.multiagent.multi_agent_env": {
        "MultiAgentEnv": "gem.multiagent:MultiAgentEnv",
        "AgentSelector": "gem.multiagent:AgentSelector",
    },
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
    # -- wrappers (gem.wrappers is a real package: these add the reference's submodules)
    "gem.wrappers.wrapper_factory": {
        "WRAPPER_FACTORY": "gem.compat.shims:WRAPPER_FACTORY",
        "TOKENIZER_REQUIRED": "gem.compat.shims:TOKENIZER_REQUIRED",
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

#: which distribution holds the reference paths below each prefix: what an import of one
#: says to install while that distribution is absent (its own rows come with it). The fallback
#: only: an installed suite says what it provides through ``gem_register_provides``, which wins
PROVIDERS: dict[str, str] = {
    "gem.envs.game_env": "gem-envs-games",
    "gem.envs.math_env": "gem-envs-math",
    "gem.envs.reasoning_gym": "gem-envs-math[reasoning-gym]",
    "gem.utils.math_grader": "gem-envs-math",
    "gem.envs.code_env": "gem-envs-code",
    "gem.envs.qa_env": "gem-envs-qa",
    "gem.utils.qa_em": "gem-envs-qa",
    "gem.tools": "gem-tools",
    "gem.utils.sandbox": "gem-tools",
    "gem.eval": "gem-evals",
    "gem.integrations": "gem-integrations",
}
