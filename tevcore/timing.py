"""Stage timer: seconds per stage of a round, with the GPU's queued work counted where it ran.

CUDA kernels run asynchronously: wall time around a launch measures the
launch, not the work. On CUDA each stage therefore synchronises its device
before it starts and before it stops, so a stage's seconds hold the kernels
it queued (and only those); on the CPU nothing waits.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import torch

from tevcore.engine.records import StageTimings


def synchronize(device: torch.device | str) -> None:
    """Wait for the work queued on `device` (nothing to wait for off CUDA)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StageTimer:
    """Accumulates seconds per stage into a `StageTimings` record."""

    def __init__(self, device: torch.device) -> None:
        self._device = torch.device(device)
        self.timings = StageTimings()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        synchronize(self._device)
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self._device)
            setattr(self.timings, name, getattr(self.timings, name) + time.perf_counter() - start)
