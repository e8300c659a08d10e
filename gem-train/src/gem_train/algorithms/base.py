"""What every algorithm shares: the :class:`Batch` it hands the learner and the :class:`Algorithm` base.

An algorithm is one class in its own module of this package (``reinforce.py``, ``rebn.py``, ``grpo.py``,
``ppo.py``) with a ``name`` (its ``algo.name``) and its YAML under ``conf/algo/``: :mod:`.registry` finds
every such class, and config validation and the trainer both read that one registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # the learner imports this package's maths: a runtime import would be circular
    from gem_train.config import AlgoConfig
    from gem_train.critic import Critic
    from gem_train.learner import Learner
    from gem_train.rollout import Episode, TurnSample


@dataclass
class Batch:
    """The turns the learner trains on, in episode order, and the lists :meth:`Learner.update` takes beside
    them (``advantages``; PPO adds ``old_values`` and ``value_targets``), one entry per turn."""

    samples: list[TurnSample]
    inputs: dict[str, list[float]]
    # what preparing the batch measured (PPO: value_mean, explained_variance), the global batch's
    metrics: dict[str, float] = field(default_factory=dict)

    def first(self, n: int | None) -> Batch:
        """The first ``n`` turns (None: all)."""
        if n is None:
            return self
        return Batch(self.samples[:n], {k: v[:n] for k, v in self.inputs.items()}, self.metrics)


def flat(nested: Sequence[Sequence[float]]) -> list[float]:
    return [x for inner in nested for x in inner]


class Algorithm:
    """An advantage estimator; subclasses set :attr:`name` and define :meth:`advantages` (or :meth:`prepare`).

    Every algorithm is built as ``cls(cfg, **context)``; ``context`` (the policy, the checkpoint, the prompt
    encoder, ``max_model_len``) is there for an algorithm that needs it, PPO's critic, and ignored by others.
    """

    #: its ``algo.name``; a class without one (a base) is not registered
    name: ClassVar[str | None] = None
    #: whether it compares episodes of one initial state (needs ``algo.group_size >= 2``)
    grouped: ClassVar[bool] = False
    #: whether it discounts by ``algo.gamma``; one that does not requires ``gamma == 1`` (an undiscounted return)
    discounts: ClassVar[bool] = True
    #: whether it learns a critic (PPO): its :attr:`critic` is then set
    learns_critic: ClassVar[bool] = False
    #: PPO's value model; the learner trains it beside the policy
    critic: Critic | None = None

    def __init__(self, cfg: AlgoConfig, **context: Any) -> None:
        self.cfg = cfg
        self.learner: Learner | None = None

    def bind(self, learner: Learner) -> Algorithm:
        """The learner the batches are for, built with this object's critic (PPO values turns with it)."""
        self.learner = learner
        return self

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        """One advantage per turn of every episode, nested like the episodes."""
        raise NotImplementedError

    def prepare(self, episodes: Sequence[Episode], keep: int | None = None) -> Batch:
        """The episodes' turns with their advantages; ``keep``: only the first that many turns are trained on
        (the statistics still see every turn)."""
        samples = [turn for ep in episodes for turn in ep.turns]
        return Batch(samples, {"advantages": flat(self.advantages(episodes))}).first(keep)
