"""One compute queue for the server: at most K model computations at once, the rest wait their turn in line.

Two people pressing Run together on one shared model each wait about twice as long, with nothing to say why.
The queue makes the wait visible and fair: a request waits first in, first out, and is told its place and an
estimate (the mean time of the last turns) while it waits. The queue is fair per participant (an owner key, the
same in all of one participant's browser tabs): a participant has at most one request in line, a new one taking
the place of their queued one (which ends with `Replaced`, so a burst of clicks never stacks), and at most one
turn running; their next request waits for it, keeping its place, while requests behind it from others start.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

FIRST_ESTIMATE_S = 10.0  # the estimate of one turn before any turn was timed
TIMED_TURNS = 20  # turns the estimate averages over


class Replaced(RuntimeError):
    """The request left the line because the same participant made a newer one."""


@dataclass(frozen=True)
class Place:
    """Where a waiting request stands: 1 = next, of `waiting` in line; `estimate_s` until its turn starts."""

    position: int
    waiting: int
    estimate_s: float

    def text(self) -> str:
        return (f"waiting for the compute queue: place {self.position} of {self.waiting} in line, "
                f"about {math.ceil(self.estimate_s)} s")


class _Ticket:
    __slots__ = ("owner", "granted", "replaced")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.granted = False
        self.replaced = False


class ComputeQueue:
    """At most `slots` turns at once; `turn(owner)` waits its place (first in, first out), then holds a slot."""

    def __init__(self, slots: int, clock: Callable[[], float] = time.monotonic) -> None:
        if slots < 1:
            raise ValueError(f"a compute queue needs at least one slot, got {slots}")
        self.slots = slots
        self._clock = clock
        self._lock = threading.Condition()
        self._line: list[_Ticket] = []
        self._running = 0
        self._busy: Counter[str] = Counter()  # running turns per owner (at most one each)
        self._times: deque[float] = deque(maxlen=TIMED_TURNS)

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._line)

    def _turn_estimate(self) -> float:
        return sum(self._times) / len(self._times) if self._times else FIRST_ESTIMATE_S

    def _place(self, ticket: _Ticket) -> Place:
        position = self._line.index(ticket) + 1
        return Place(position, len(self._line), self._turn_estimate() * math.ceil(position / self.slots))

    def _grant(self) -> None:
        """Start the first requests in line whose owner has no turn running, while slots are free."""
        for ticket in list(self._line):
            if self._running >= self.slots:
                break
            if self._busy[ticket.owner]:
                continue
            self._line.remove(ticket)
            ticket.granted = True
            self._running += 1
            self._busy[ticket.owner] += 1
        self._lock.notify_all()

    def _release(self, ticket: _Ticket) -> None:
        self._running -= 1
        self._busy[ticket.owner] -= 1
        if not self._busy[ticket.owner]:
            del self._busy[ticket.owner]

    def _enter(self, owner: str) -> _Ticket:
        ticket = _Ticket(owner)
        with self._lock:
            mine = next((i for i, queued in enumerate(self._line) if queued.owner == owner), None)
            if mine is None:
                self._line.append(ticket)
            else:  # the newer request takes the older one's place in line
                self._line[mine].replaced = True
                self._line[mine] = ticket
            self._grant()
        return ticket

    @contextmanager
    def turn(self, owner: str, on_wait: Callable[[Place], None] | None = None, poll_s: float = 0.5) -> Iterator[None]:
        """Wait for a slot, telling `on_wait` the place in line every `poll_s` seconds; hold it inside the block.

        Raises `Replaced` when the same owner asks again while this request waits. An exception from `on_wait`
        (a page stopped by its user) takes the request out of line and propagates.
        """
        ticket = self._enter(owner)
        try:
            while True:
                with self._lock:
                    if ticket.replaced:
                        raise Replaced("replaced by your newer request")
                    if ticket.granted:
                        break
                    place = self._place(ticket)
                if on_wait is not None:
                    on_wait(place)
                with self._lock:
                    if not (ticket.granted or ticket.replaced):
                        self._lock.wait(poll_s)
        except BaseException:
            with self._lock:
                if ticket in self._line:
                    self._line.remove(ticket)
                elif ticket.granted:
                    self._release(ticket)
                self._grant()
            raise
        began = self._clock()
        try:
            yield
        finally:
            with self._lock:
                self._release(ticket)
                self._times.append(self._clock() - began)
                self._grant()
