"""DatasetEnv: the part every env over a fixed list of records shares.

``reset(idx=i)`` poses record ``i`` (a deterministic evaluation order); a plain
``reset()`` takes the next record of a shuffled epoch, each epoch's order drawn from the
env's own RNG (``shuffle=False``: dataset order); ``reset(seed=s)`` restarts the epochs
from ``s``. ``get_state``/``set_state`` carry the order and the position, and ``spawn``
rebuilds a sibling from the same arguments, so a sibling of an env on cached records
shares them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from gem.core import Env


class DatasetEnv(Env):
    """Base class of envs that pose the records of a dataset one per episode.

    Subclasses call ``super().__init__(records, shuffle=..., seed=...)`` and implement
    :meth:`pose` (the observation for a record) and ``step``; :attr:`record` is the
    current one. A subclass with more per-episode state extends :meth:`reset`,
    :meth:`get_state` and :meth:`set_state` through ``super()``.

    >>> class Echo(DatasetEnv):
    ...     def pose(self, record):
    ...         return f"say {record}"
    ...     def step(self, action):
    ...         return "", float(action == self.record), True, False, {}
    >>> env = Echo(["a", "b", "c"], shuffle=False)
    >>> env.reset(), env.reset(idx=2)
    (('say a', {'idx': 0, 'epoch': 0}), ('say c', {'idx': 2, 'epoch': 0}))
    """

    def __init__(self, records: Sequence[Any], shuffle: bool = True, seed: int | None = None) -> None:
        if len(records) == 0:
            raise ValueError(f"{type(self).__name__} got an empty dataset")
        self.records = records
        self.shuffle = shuffle
        #: the index of the record posed now (``None`` before the first reset)
        self.index: int | None = None
        #: how many epochs of the shuffled order have been completed
        self.epoch = 0
        self._order: list[int] | None = None
        self._epoch_seed = 0
        self._position = 0
        self._replaced: Any = None
        if seed is not None:  # a constructor seed (the reference envs take one) fixes the order
            self._seed(seed)

    def data_fingerprint(self) -> str | None:
        """The hash of the records (computed once per records object)."""
        from gem.fingerprint import records_fingerprint

        return records_fingerprint(self.records)

    # -- order ------------------------------------------------------------------------
    def _permutation(self, epoch_seed: int) -> list[int]:
        indices = list(range(len(self.records)))
        if self.shuffle:
            # a private generator seeded from the env's stream: the order is a pure
            # function of one integer, so get_state stores that integer, not the order
            random.Random(epoch_seed).shuffle(indices)
        return indices

    def _new_epoch(self) -> None:
        self._epoch_seed = self.rng.getrandbits(63)
        self._order = self._permutation(self._epoch_seed)
        self._position = 0

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """Pose the next record; ``idx`` picks record ``idx``, ``seed`` restarts the
        shuffled order from that seed. ``info`` holds ``idx`` and ``epoch``."""
        super().reset(seed)
        self._replaced = None
        if idx is not None:
            if not 0 <= int(idx) < len(self.records):
                raise IndexError(f"idx={idx} is outside the dataset (0..{len(self.records) - 1})")
            self.index = int(idx)
        else:
            if seed is not None:
                self.epoch = 0
                self._new_epoch()
            elif self._order is None or self._position >= len(self._order):
                if self._order is not None:
                    self.epoch += 1
                self._new_epoch()
            assert self._order is not None
            self.index = self._order[self._position]
            self._position += 1
        return self.pose(self.record), {"idx": self.index, "epoch": self.epoch}

    @property
    def dataset(self) -> Sequence[Any]:
        """The records (the reference's name). Assigning a new sequence (e.g.
        ``env.dataset = env.dataset.select(range(100))``) restarts the epochs over it."""
        return self.records

    @dataset.setter
    def dataset(self, records: Sequence[Any]) -> None:
        if len(records) == 0:
            raise ValueError(f"{type(self).__name__} got an empty dataset")
        self.records = records
        self.index, self.epoch, self._order, self._position = None, 0, None, 0

    @property
    def record(self) -> Any:
        """The record posed now (or the one assigned to it since the last reset)."""
        if self._replaced is not None:
            return self._replaced
        if self.index is None:
            raise RuntimeError("call reset() before step()")
        return self.records[self.index]

    @record.setter
    def record(self, record: Any) -> None:
        # the reference's evaluation loops assign the gold answer (or tests) and step
        # without a reset; envs' ``answer``/``tests`` setters route here. Next reset undoes it.
        self._replaced = record

    def pose(self, record: Any) -> str:
        """The observation that poses ``record``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement pose()")

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "rng": self.rng_state(),
            "epoch": self.epoch,
            "epoch_seed": self._epoch_seed,
            "position": self._position,
            "has_order": self._order is not None,
            "current": self.index,
            "size": len(self.records),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state["size"] != len(self.records):
            raise ValueError(f"state is of a dataset of {state['size']} records, this env has {len(self.records)}")
        self.set_rng_state(state["rng"])
        self.epoch = state["epoch"]
        self._epoch_seed = state["epoch_seed"]
        self._position = state["position"]
        self._order = self._permutation(self._epoch_seed) if state["has_order"] else None
        self.index = state["current"]
