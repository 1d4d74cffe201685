"""The seat a request arrives with, and the compute-queue turn every heavy service holds through it.

A heavy service (a public function of `tevcore.studio` whose first parameter is a `Seat`) checks its request
against `seat.limits` first, so a refusal costs no wait, then does its work inside `queue_turn(seat)`: the
participant waits their place in the server's one queue (told through `seat.on_wait`), and between units of work
`seat.still_here()` lets a page that is gone (its tab closed) stop the work, which frees its slot at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tevcore.room.limits import Limits
from tevcore.room.queue import ComputeQueue, Place


class Left(RuntimeError):
    """The page that asked is gone (its tab was closed): its work stops and its queue slot is freed."""


def _present() -> None:
    """A page that cannot leave (a test, the command line)."""


@dataclass(frozen=True)
class Seat:
    """Who asks and under which rules: the server's caps and compute queue, the participant's key (the owner of
    their place in line), how the page is told its place while waiting, and a check between units of work that
    raises `Left` once the page is gone."""

    limits: Limits
    queue: ComputeQueue
    owner: str
    on_wait: Callable[[Place], None] | None = None
    still_here: Callable[[], None] = _present


@contextmanager
def queue_turn(seat: Seat) -> Iterator[None]:
    """Wait for the participant's turn in the compute queue, hold one slot for the block, free it on any exit."""
    with seat.queue.turn(seat.owner, on_wait=seat.on_wait):
        seat.still_here()
        yield
