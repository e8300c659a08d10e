"""Adapters that let other trainers drive GEM envs, one module per framework.

Each module imports only gem-core and its framework, and the framework is an optional
extra of gem-core (never a default dependency); the extras below install from a clone:

==============================  ==========================================  =========================
module                          hook                                        install
==============================  ==========================================  =========================
``gem.integrations.trl``        ``GRPOTrainer(rollout_func=...)`` and       ``gem-core[trl]``
                                ``GRPOTrainer(environment_factory=...)``
``gem.integrations.verl``       ``AgentLoopBase`` registered as             ``gem-core[verl]``
                                ``gem_agent``
``gem.integrations.openrlhf``   ``AgentInstanceBase`` /                     ``gem-core[openrlhf]``
                                ``MultiTurnAgentExecutor``
``gem.integrations.tinker``     ``Env``, ``EnvGroupBuilder``,               ``gem-core[tinker]``
                                ``RLDataset``, ``RLDatasetBuilder``
``gem.integrations.skyrl``      ``BaseTextEnv`` registered with skyrl-gym   ``gem-core[skyrl]``
                                as ``gem``
``gem.integrations.verifiers``  ``vf.Taskset`` and ``vf.Env``, a plugin     ``gem-core[verifiers]``
                                ``vf-eval`` loads as ``gem_verifiers``
``gem.integrations.gymnasium``  ``gymnasium.Env``                           ``gem-core[gymnasium]``
==============================  ==========================================  =========================

Importing a module whose framework is missing raises an ``ImportError`` on one line
naming the install commands (for TRL, verl, OpenRLHF, Tinker and SkyRL, those of
``examples/<framework>/README.md``, which its nox session runs: torch's CPU build first,
and OpenRLHF and the Tinker cookbook with ``--no-deps``, since their declared dependencies
cannot install on a CPU machine); a framework release whose hook no longer matches fails at import (or at
construction) with a message naming the version the adapter was tested with.
"""
