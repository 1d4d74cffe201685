"""The processes of a torchrun launch: which one this is, and sharing work and results among them.

Every command runs unchanged as one process (rank 0 of 1). Under `torchrun
--nproc-per-node N` the launcher sets RANK, LOCAL_RANK and WORLD_SIZE, and the
first call to `world` joins the process group: NCCL on CUDA (each rank on its
own GPU), gloo on CPU. Training splits each global batch over the ranks
(DDP); bench and eval-drafter split their prompts (`shard`) and `gather` the
per-prompt results, which rank 0 reports in prompt order, so the report
equals a one-process run's wherever it does not measure time.
"""

from __future__ import annotations

import os
from typing import TypeVar

import torch
import torch.distributed as dist

from tevcore.parsing import env_whole

T = TypeVar("T")


def _world_size() -> int:
    """WORLD_SIZE as torchrun sets it (1 when unset); a bad value is one line naming the variable."""
    return env_whole(os.environ, "WORLD_SIZE", 1)


def _local_rank() -> int:
    return env_whole(os.environ, "LOCAL_RANK", 0, minimum=0)


def world() -> tuple[int, int]:
    """(rank, world size); joins the process group when launched by torchrun (or spawned with its variables)."""
    size = _world_size()
    if size > 1 and not dist.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(_local_rank())
        dist.init_process_group("nccl" if cuda else "gloo")
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def is_first() -> bool:
    """Whether this process reports and writes files (rank 0, or the only process)."""
    return world()[0] == 0


def device_for_rank(device: str) -> str:
    """'auto' becomes this rank's own GPU under a multi-GPU launch; any other choice stays."""
    if device == "auto" and torch.cuda.is_available() and _world_size() > 1:
        return f"cuda:{_local_rank()}"
    return device


def shard(items: list[T]) -> list[tuple[int, T]]:
    """This rank's share of `items` with their indices: items r, r + W, r + 2W, ..."""
    rank, size = world()
    return [(i, item) for i, item in enumerate(items) if i % size == rank]


def gather(rows: list[T]) -> list[T]:
    """Every rank's `rows`, rank 0's first, on every rank (one process: `rows` itself)."""
    _, size = world()
    if size == 1:
        return rows
    parts: list[list[T] | None] = [None] * size
    dist.all_gather_object(parts, rows)
    return [row for part in parts for row in part]


def mean_over_ranks(values: dict[str, float]) -> dict[str, float]:
    """Each value averaged over the ranks (one process: `values` itself). Every rank must pass the same keys.

    A rank's figures are means over its equal share of a global batch, so their mean is the global batch's.
    """
    _, size = world()
    if size == 1:
        return values
    keys = sorted(values)
    summed = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(summed)
    return {k: float(v) / size for k, v in zip(keys, summed.tolist())}


def mean_tensor_over_ranks(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor averaged over the ranks (one process: `tensor` itself), e.g. a gradient of each rank's share."""
    _, size = world()
    if size == 1:
        return tensor
    summed = tensor.clone()
    dist.all_reduce(summed)
    return summed / size


def from_first(value: T) -> T:
    """Rank 0's `value` on every rank: a choice that must not differ between ranks (one measured on a clock)."""
    _, size = world()
    if size == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if world()[1] > 1:
        dist.barrier()


def leave() -> None:
    """Leave the process group, if this process joined one. A gloo group left to the interpreter's shutdown can
    abort a rank that has finished its work ('terminate called without an active exception'): its worker threads
    are torn down after Python is."""
    if dist.is_initialized():
        dist.destroy_process_group()
