"""Adapters that let other trainers drive GEM envs, one module per framework.

Each module imports only gem-core and its framework, and the framework is an optional
extra of gem-core (never a default dependency):

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
``gem.integrations.gymnasium``  ``gymnasium.Env``                           ``gem-core[gymnasium]``
==============================  ==========================================  =========================

Importing a module whose framework is missing raises an ``ImportError`` that names
the extra; a framework release whose hook no longer matches fails at import (or at
construction) with a message naming the version the adapter was tested with.
"""
