"""Data-parallel training under ``torchrun``: the process group and the few collectives the trainer needs.

``torchrun --nproc_per_node N -m gem_train ...`` starts N copies of the trainer; each learns
from its share of every batch and DDP adds the gradients up, so an update equals the
single-process update on the whole batch. Outside torchrun (no ``WORLD_SIZE`` in the
environment) every function here is a no-op for a world of one process, so the trainer
calls them unconditionally.

>>> launched(), rank(), world_size(), is_main()    # a plain process
(False, 0, 1, True)
>>> all_reduce_moments((2.0, 3.0, 5.0))           # a world of one: its own moments
(2.0, 3.0, 5.0)
>>> shard_range(10, rank=1, world=3)              # the second of three shares of 10 items
(4, 7)
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed as dist

if TYPE_CHECKING:  # the type only: rebn imports this module for its all-reduce
    from gem_train.algorithms.rebn import Moments

T = TypeVar("T")


def launched() -> bool:
    """This process was started by ``torchrun`` (or anything else that sets its environment variables)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def active() -> bool:
    """A process group of more than one process is up: the learner is data-parallel."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's rank in the group (0 without one)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    """Processes in the group (1 without one)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def is_main() -> bool:
    """Rank 0: the process that writes metrics and checkpoints and runs evaluation."""
    return rank() == 0


def local_rank() -> int:
    """This process's index on its machine (``LOCAL_RANK``; 0 outside torchrun): which GPU it uses."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def init(device: str, backend: str = "auto", timeout_minutes: float = 60.0) -> bool:
    """Join the process group torchrun set up; returns whether this call created it (then call :func:`shutdown`).

    ``backend="auto"`` takes nccl for a learner on ``cuda`` and gloo on CPU. ``timeout_minutes`` bounds every
    collective, including the waits of the other ranks while rank 0 evaluates or, with rank-0 rollouts, collects.
    """
    if not launched() or dist.is_initialized():
        return False
    cuda = device.startswith("cuda")
    if backend == "auto":
        backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(local_device(device))
    dist.init_process_group(backend, timeout=timedelta(minutes=timeout_minutes))
    return True


def shutdown() -> None:
    """Leave the process group. No barrier: after an error on one rank the others are in other collectives, and
    torchrun stops them when this one exits."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def local_device(device: str) -> str:
    """``cuda`` becomes this rank's GPU (``cuda:<LOCAL_RANK>``) under torchrun; any other device stays.

    >>> local_device("cpu")
    'cpu'
    """
    return f"cuda:{local_rank()}" if device == "cuda" and launched() else device


def _collective_device() -> torch.device:
    # nccl moves only GPU tensors
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def barrier() -> None:
    """Wait for every rank (no-op alone)."""
    if world_size() > 1:
        dist.barrier()


def main_first(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0, then on the other ranks: for work done once into a shared folder (building the tiny
    model) that the others then find done, with no two ranks writing at the same time."""
    if is_main():
        result = fn()
        barrier()
        return result
    barrier()
    return fn()


def all_reduce_moments(m: Moments) -> Moments:
    """The sum over ranks of ``(count, sum, sum of squares)``, in float64: the global batch's moments, for
    :mod:`gem_train.algorithms.rebn` and PPO's whitening (their ``reduce`` argument)."""
    if world_size() == 1:
        return m
    t = torch.tensor(m, dtype=torch.float64, device=_collective_device())
    dist.all_reduce(t)
    count, total, squares = t.tolist()
    return count, total, squares


def all_gather(obj: T) -> list[T]:
    """Every rank's ``obj`` (picklable), in rank order, on every rank."""
    if world_size() == 1:
        return [obj]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def all_sum(values: dict[str, float]) -> dict[str, float]:
    """Key-wise sums over ranks, added in rank order so every rank gets the same floats; a key missing on a rank
    counts as 0 there (a rank that had no turns)."""
    if world_size() == 1:
        return values
    total: dict[str, float] = {}
    for part in all_gather(values):
        for key, value in part.items():
            total[key] = total.get(key, 0.0) + value
    return total


def scatter(shares: list[T] | None) -> T:
    """Rank 0 hands ``shares[r]`` to rank ``r``; the other ranks pass None. Returns this rank's share."""
    if world_size() == 1:
        assert shares is not None
        return shares[0]
    out: list[Any] = [None]
    dist.scatter_object_list(out, shares if is_main() else None, src=0)
    return out[0]


def shard_range(n: int, rank: int, world: int) -> tuple[int, int]:
    """``[start, end)`` of rank's contiguous share of ``n`` items; shares differ in size by at most one, the
    larger ones first, and in rank order they cover ``0..n`` (so rank order is the single-process order).

    >>> [shard_range(5, r, 2) for r in range(2)]
    [(0, 3), (3, 5)]
    """
    size, extra = divmod(n, world)
    start = rank * size + min(rank, extra)
    return start, start + size + (1 if rank < extra else 0)


def token_shard_ranges(lengths: Sequence[int], world: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` shares of items of ``lengths`` tokens, one per rank in rank order, with about
    the same number of tokens each (an item goes to the rank whose share its middle token falls in), so no rank's
    update waits on one holding all the long turns.

    >>> token_shard_ranges([100, 10, 10, 10, 10, 60], 2)
    [(0, 1), (1, 6)]
    """
    total = sum(lengths)
    if total == 0:
        return [shard_range(len(lengths), r, world) for r in range(world)]
    owner, before = [], 0
    for n in lengths:
        owner.append(min(int((before + n / 2) * world / total), world - 1))
        before += n
    starts = [next((i for i, o in enumerate(owner) if o >= r), len(lengths)) for r in range(world)]
    return [(starts[r], starts[r + 1] if r + 1 < world else len(lengths)) for r in range(world)]


def data_parallel(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` wrapped in DistributedDataParallel when a group is up, else ``module`` itself.

    Buffers are not broadcast: the ranks' buffers are equal (rotary caches), and the broadcast would be a
    collective in every forward, which ranks with different numbers of micro-batches would not pair up.
    """
    if not active():
        return module
    ddp = torch.nn.parallel.DistributedDataParallel
    # torch 2.13 renamed broadcast_buffers (now deprecated, with a warning) to forward_sync_buffers
    options = inspect.signature(ddp).parameters
    no_buffer_sync = "forward_sync_buffers" if "forward_sync_buffers" in options else "broadcast_buffers"
    device = next(module.parameters()).device
    return ddp(module, device_ids=[device] if device.type == "cuda" else None, **{no_buffer_sync: False})


def fully_sharded(model: torch.nn.Module, root: torch.nn.Module) -> torch.nn.Module:
    """FSDP2 (``trainer.strategy=fsdp``): each decoder layer of ``model`` (``model.model.layers``) a unit of its
    own, then ``root`` (the embeddings, the final norm and the head, and the module training runs through), so
    each rank holds 1/world of the float32 weights, their gradients and AdamW's moments, and a forward gathers
    one layer at a time. The gradients are averaged over the ranks as under DDP."""
    from torch.distributed.fsdp import fully_shard

    for layer in getattr(getattr(model, "model", None), "layers", None) or []:
        fully_shard(layer)
    fully_shard(root)
    return root


def full_tensor(value: torch.Tensor) -> torch.Tensor:
    """A sharded (DTensor) parameter gathered whole on every rank (a collective); any other tensor as it is."""
    gather = getattr(value, "full_tensor", None)
    return gather() if gather is not None else value
