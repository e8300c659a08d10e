"""GEM's trainer: multi-turn RL (ReBN, GRPO, REINFORCE, PPO-clip) on gem envs, with vLLM or HF rollouts.

``import gem_train`` is light; :func:`gem_train.trainer.train` runs a
:class:`gem_train.config.TrainConfig`::

    from gem_train.config import TrainConfig
    from gem_train.trainer import train
    summary = train(TrainConfig())
"""

__version__ = "0.1.0"
