"""Adapters that let other trainers drive GEM envs, one module per framework, and ``gem serve``.

Each module imports only gem-core and its framework; the framework is an optional extra
of gem-integrations (never a default dependency). From a clone of the repo:

==============================  ==========================================  ================================
module                          hook                                        install
==============================  ==========================================  ================================
``gem_integrations.trl``        ``GRPOTrainer(rollout_func=...)`` and       ``gem-integrations[trl]``
                                ``GRPOTrainer(environment_factory=...)``
``gem_integrations.verl``       ``AgentLoopBase`` registered as             ``gem-integrations[verl]``
                                ``gem_agent``
``gem_integrations.openrlhf``   ``AgentInstanceBase`` /                     ``gem-integrations[openrlhf]``
                                ``MultiTurnAgentExecutor``
``gem_integrations.tinker``     ``Env``, ``EnvGroupBuilder``,               ``gem-integrations[tinker]``
                                ``RLDataset``, ``RLDatasetBuilder``
``gem_integrations.skyrl``      ``BaseTextEnv`` registered with skyrl-gym   ``gem-integrations[skyrl]``
                                as ``gem``
``gem_integrations.verifiers``  ``vf.Taskset`` and ``vf.Env``, a plugin     ``gem-integrations[verifiers]``
                                ``vf-eval`` loads as ``gem_verifiers``
``gem_integrations.gymnasium``  ``gymnasium.Env``                           ``gem-integrations[gymnasium]``
``gem_integrations.openenv_``   ``gem serve``: OpenEnv's server             ``gem-integrations[serve]``
``server``
==============================  ==========================================  ================================

Importing a module whose framework is missing raises an ``ImportError`` on one line
naming the install commands (for TRL, verl, OpenRLHF, Tinker, SkyRL and verifiers, those of
``examples/<framework>/README.md``, which its nox session runs: torch's CPU build first,
and OpenRLHF and the Tinker cookbook with ``--no-deps``, since their declared dependencies
cannot install on a CPU machine); a framework release whose hook no longer matches fails at import (or at
construction) with a message naming the version the adapter was tested with.

The reference-style paths ``gem.integrations.<module>`` still import these modules (the
plugin contributes them to gem-core's compat table).
"""
