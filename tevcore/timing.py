"""The one timer: wall time of a call or of a stage, synchronising CUDA only on CUDA.

CUDA kernels run asynchronously: wall time around a launch measures the
launch, not the work. So every timed span waits for its device's queued work
before it starts and before it stops; on the CPU nothing waits.
`seconds_of` times one call; `StageTimer` accumulates the stages of a round
(names from `records.STAGES`); `median_seconds` is the benchmark method
(warm-up, then the median over repeats) that bench-verifiers and the app use.
`event_seconds_of` times one call on the GPU's own clock (CUDA events around
it on the current stream) and falls back to `seconds_of` off CUDA.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import torch

from tevcore.engine.records import STAGES, StageTimings

T_ = TypeVar("T_")


def synchronize(device: torch.device | str | None) -> None:
    """Wait for the work queued on `device` (nothing to wait for off CUDA)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def seconds_of(action: Callable[[], T_], device: torch.device | str | None = None) -> tuple[T_, float]:
    """Result and wall time of one call, waiting for queued GPU work on both sides."""
    synchronize(device)
    start = time.perf_counter()
    result = action()
    synchronize(device)
    return result, time.perf_counter() - start


def event_seconds_of(action: Callable[[], T_], device: torch.device | str | None = None) -> tuple[T_, float]:
    """Result and seconds of one call between two CUDA events on `device` (host stalls inside it count, work
    queued before it does not); `seconds_of` where `device` is not a CUDA device."""
    if device is None or torch.device(device).type != "cuda":
        return seconds_of(action, device)
    synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    result = action()
    end.record()
    end.synchronize()
    return result, start.elapsed_time(end) / 1e3


def median_seconds(action: Callable[[], object], repeats: int, device: torch.device | str | None = None,
                   warmup: int = 1) -> float:
    """Median wall time of `repeats` calls after `warmup` untimed ones (first calls pay one-off costs)."""
    for _ in range(warmup):
        action()
    return statistics.median(seconds_of(action, device)[1] for _ in range(max(1, repeats)))


class StageTimer:
    """Accumulates seconds per stage into a `StageTimings` record."""

    def __init__(self, device: torch.device) -> None:
        self._device = torch.device(device)
        self.timings = StageTimings()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}; stages are {', '.join(STAGES)}")
        synchronize(self._device)
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self._device)
            setattr(self.timings, name, getattr(self.timings, name) + time.perf_counter() - start)
