"""Under torchrun: which episodes a rank plays and which turns it learns from.

Both ``trainer.distributed.rollout`` modes run the same steps on every rank (collect, prepare,
share, update) and differ only in who samples:

- ``every_rank``: each rank plays a contiguous share of every wave's groups (whole groups, so GRPO
  and RLOO need nothing from other ranks); the prepared turns are then shared out again by tokens.
- ``rank0``: rank 0 plays every episode and the others none (their part of ReBN's and PPO's
  all-reduced statistics is empty); once the batch is prepared rank 0 hands every rank a
  contiguous share of its turns, advantages and PPO's values with them.

In rank order the shares are the single process's batch, so together the ranks learn what one
process would; in a plain process every rank-dependent answer here is "all of it".

>>> Shards("every_rank", rank=1, world=2).episodes(groups=3, group_size=2)   # the last group of three
(4, 6)
>>> Shards("rank0", rank=1, world=2).episodes(groups=3, group_size=2)       # only rank 0 plays
(0, 0)
>>> Shards().kept_turns([[7], [5]], turns_per_iter=10)                        # two waves, 10 of their 12 turns
10
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from gem_train import distributed
from gem_train.algos import Batch

T = TypeVar("T")


@dataclass(frozen=True)
class Shards:
    """This rank's place in the run: ``mode`` is ``trainer.distributed.rollout``."""

    mode: str = "every_rank"
    rank: int = 0
    world: int = 1

    @classmethod
    def current(cls, mode: str) -> Shards:
        """This process's shards (a world of one outside torchrun)."""
        return cls(mode, distributed.rank(), distributed.world_size())

    @property
    def plays(self) -> bool:
        """This rank collects episodes, so it needs an engine."""
        return self.mode != "rank0" or self.rank == 0

    def episodes(self, groups: int, group_size: int) -> tuple[int, int]:
        """``[first, last)`` of the episodes this rank plays of a wave of ``groups`` groups of ``group_size``."""
        if self.mode == "rank0":
            return (0, groups * group_size) if self.rank == 0 else (0, 0)
        first, last = distributed.shard_range(groups, self.rank, self.world)
        return first * group_size, last * group_size

    def share(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share of ``items`` that every rank holds alike (the SFT stage's batches)."""
        first, last = distributed.shard_range(len(items), self.rank, self.world)
        return list(items[first:last])

    def count_turns(self, turns: int) -> list[int]:
        """Every rank's count of a wave's turns, in rank order (a collective: every rank calls it)."""
        return distributed.all_gather(turns)

    def kept_turns(self, counts: Sequence[Sequence[int]], turns_per_iter: int | None) -> int | None:
        """How many of this rank's turns, in episode order, are trained on so that the ranks together keep the
        first ``turns_per_iter`` turns of all (None: every turn). ``counts[w][r]``: turns of wave ``w`` on rank
        ``r``; every wave but the last is kept whole (too few turns made the next one necessary)."""
        if not turns_per_iter:
            return None
        before = sum(map(sum, counts[:-1])) + sum(counts[-1][:self.rank])
        return sum(c[self.rank] for c in counts[:-1]) + min(max(turns_per_iter - before, 0), counts[-1][self.rank])

    def learner_share(self, batch: Batch) -> Batch:
        """The turns this rank learns from (a collective): its contiguous share, of about the same number of
        tokens as every other rank's, of all ranks' turns in rank order (``every_rank``: the ranks' batches
        gathered; ``rank0``: rank 0's, the other ranks passing their empty batch). In rank order the shares are
        still the one-process batch, so the update is the same; no rank waits on one holding the long turns."""
        if self.world == 1:
            return batch
        if self.mode != "rank0":
            batches = distributed.all_gather(Batch(batch.samples, batch.inputs))
            keys = list(dict.fromkeys(k for b in batches for k in b.inputs))
            samples = [s for b in batches for s in b.samples]
            inputs = {k: [v for b in batches for v in b.inputs.get(k, [])] for k in keys}
            tokens = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
            first, last = distributed.token_shard_ranges(tokens, self.world)[self.rank]
            return Batch(samples[first:last], {k: v[first:last] for k, v in inputs.items()}, batch.metrics)
        shares = None
        if self.rank == 0:
            shares = []
            # contiguous shares (rank order is the one-process order) of about equal tokens, not equal turns
            tokens = [len(s.prompt_ids) + len(s.response_ids) for s in batch.samples]
            for first, last in distributed.token_shard_ranges(tokens, self.world):
                shares.append(Batch(batch.samples[first:last], {k: v[first:last] for k, v in batch.inputs.items()}))
        mine = distributed.scatter(shares)
        return Batch(mine.samples, mine.inputs, batch.metrics)
