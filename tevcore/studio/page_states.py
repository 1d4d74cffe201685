"""One typed state object per page and participant, kept by the server, so a page switch and a reload of the page
find a participant's work where they left it.

A Streamlit session is one tab and ends with a reload; widgets forget their values when their page is left. A
page therefore keeps what it shows (its source, settings, results, the selected round, form values) in one
object of its own type, which this store hands back to every session of the same participant (all tabs of one
browser share it: `tevcore.studio.participants`). The store is bounded: it keeps the most recently used
participants only, and forgets one idle past the time to live, so a crowd of one-visit browsers cannot grow it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

State = TypeVar("State")


def state_key(kind: type) -> str:
    """The session-state entry a page's state object of type `kind` is held under within one session."""
    return f"page_state:{kind.__module__}.{kind.__qualname__}"


class PageStates:
    """Per participant, one state object per page type (created by `make` on first use)."""

    def __init__(self, max_participants: int = 200, idle_seconds: float = 2 * 3600,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_participants < 1 or idle_seconds <= 0:
            raise ValueError("a page-state store keeps at least one participant for a positive time")
        self.max_participants, self.idle_seconds, self._clock = max_participants, idle_seconds, clock
        self._states: OrderedDict[str, tuple[float, dict[type, object]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, participant: str, kind: type[State], make: Callable[[], State] | None = None) -> State:
        """The participant's `kind` object, made by `make` (default: `kind()`) the first time or after it was
        forgotten."""
        now = self._clock()
        with self._lock:
            self._forget_idle(now)
            _, pages = self._states.pop(participant, (now, {}))
            self._states[participant] = (now, pages)
            while len(self._states) > self.max_participants:
                self._states.popitem(last=False)
            if kind not in pages:
                pages[kind] = (make or kind)()
            return pages[kind]  # type: ignore[return-value]

    def __len__(self) -> int:
        with self._lock:
            return len(self._states)

    def _forget_idle(self, now: float) -> None:
        while self._states:
            oldest, (used, _) = next(iter(self._states.items()))
            if now - used <= self.idle_seconds:
                return
            del self._states[oldest]
