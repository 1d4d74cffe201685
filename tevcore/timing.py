"""Stage timer: wall time per stage of a round, synchronising CUDA only on CUDA."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import torch

from tevcore.engine.records import StageTimings


class StageTimer:
    """Accumulates seconds per stage into a `StageTimings` record."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = torch.device(device).type == "cuda"
        self.timings = StageTimings()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._cuda:
                torch.cuda.synchronize()
            setattr(self.timings, name, getattr(self.timings, name) + time.perf_counter() - start)
