"""The Lessons page's service: a lesson's truth computed once per server, a prediction checked against it, and a
participant's progress as one typed object the page keeps in its session (and in the participant's room space).

A truth is a fixed function of its lesson's setting, so it is computed once and shared: the first participant who
presses Run computes it (a heavy one in a turn of the server's compute queue), everyone after reads it, and
twenty participants who press Run together wait for the one computation instead of queueing twenty.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from tevcore.room.queue import ComputeQueue, Place
from tevcore.studio.lessons import LESSONS, Lesson, Truth


def lesson(key: str) -> Lesson:
    """The lesson named `key`, or a ValueError naming the lessons."""
    try:
        return LESSONS[key]
    except KeyError:
        raise ValueError(f"no lesson {key!r}; the lessons are {', '.join(LESSONS)}") from None


@dataclass(frozen=True)
class LessonRequest:
    """A committed prediction to check: the lesson and the prediction, parsed by the lesson's answer."""

    lesson: str
    prediction: float | str

    @classmethod
    def of(cls, key: str, raw: object) -> LessonRequest:
        """The request for `raw` (what the page collected), checked once here; ValueError with a plain line."""
        return cls(key, lesson(key).answer.parse(raw))


@dataclass(frozen=True)
class LessonCheck:
    """The prediction, the truth the package computed, and whether the prediction is right."""

    lesson: str
    prediction: float | str
    truth: Truth
    correct: bool


class TruthCache:
    """Each lesson's truth, computed once per server. A heavy truth is computed in a turn of `queue`; callers who
    ask while it is being computed wait for it (one lock per lesson) instead of computing it again."""

    def __init__(self, queue: ComputeQueue | None = None) -> None:
        self._queue = queue
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._truths: dict[str, Truth] = {}
        self.computations = 0  # truths computed so far (one per lesson at most)

    def truth(self, key: str, owner: str, on_wait: Callable[[Place], None] | None = None) -> Truth:
        """The truth of lesson `key`: cached, or computed now (in a queue turn of `owner` when heavy)."""
        found = lesson(key)
        with self._lock:
            if key in self._truths:
                return self._truths[key]
            mine = self._locks.setdefault(key, threading.Lock())
        with mine:
            with self._lock:
                if key in self._truths:  # computed while this caller waited for the lesson's lock
                    return self._truths[key]
            if found.heavy and self._queue is not None:
                with self._queue.turn(owner, on_wait=on_wait):
                    truth = found.truth()
            else:
                truth = found.truth()
            with self._lock:
                self._truths[key] = truth
                self.computations += 1
            return truth

    def check(self, request: LessonRequest, owner: str, on_wait: Callable[[Place], None] | None = None
              ) -> LessonCheck:
        """Check a committed prediction against the lesson's truth."""
        truth = self.truth(request.lesson, owner, on_wait)
        return LessonCheck(request.lesson, request.prediction, truth,
                           lesson(request.lesson).answer.correct(request.prediction, truth.value))


# ---------------------------------------------------------------------- a participant's progress

@dataclass
class LessonProgress:
    """One lesson as one participant left it: the prediction committed (locked until a retry), whether the run
    revealed the truth, and whether the prediction was right."""

    prediction: float | str | None = None
    revealed: bool = False
    correct: bool | None = None
    attempts: int = 0  # predictions committed so far (a retry starts another)


class ProgressError(ValueError):
    """A step out of order: a second prediction before a retry, a run before a prediction."""


@dataclass
class LessonSession:
    """A participant's progress through the lessons: the page keeps one in its session state (it survives a page
    switch) and, in a room, saves it as JSON in the participant's space."""

    name: str = ""  # a name the participant chose (anonymous when empty)
    current: str = next(iter(LESSONS))
    progress: dict[str, LessonProgress] = field(default_factory=dict)

    def of(self, key: str) -> LessonProgress:
        lesson(key)
        return self.progress.setdefault(key, LessonProgress())

    def commit(self, request: LessonRequest) -> LessonProgress:
        """Lock a prediction in; a committed one stays until a retry."""
        state = self.of(request.lesson)
        if state.prediction is not None:
            raise ProgressError("a prediction is already committed for this lesson: retry to change it")
        state.prediction, state.revealed, state.correct = request.prediction, False, None
        state.attempts += 1
        return state

    def request(self, key: str) -> LessonRequest:
        """The committed prediction of lesson `key`, as the request its run checks."""
        state = self.of(key)
        if state.prediction is None:
            raise ProgressError("commit a prediction before the run")
        return LessonRequest(key, state.prediction)

    def reveal(self, check: LessonCheck) -> LessonProgress:
        state = self.of(check.lesson)
        if state.prediction != check.prediction:
            raise ProgressError("that check is not of the committed prediction")
        state.revealed, state.correct = True, check.correct
        return state

    def retry(self, key: str) -> LessonProgress:
        """Unlock the prediction of lesson `key` (its attempts are kept)."""
        state = self.of(key)
        state.prediction, state.revealed, state.correct = None, False, None
        return state

    def solved(self) -> int:
        return sum(bool(p.correct) for p in self.progress.values())

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "current": self.current,
                           "progress": {k: asdict(v) for k, v in self.progress.items()}, "saved": time.time()})

    @classmethod
    def from_json(cls, text: str) -> LessonSession:
        """A saved session; ValueError when the text is not one (a lesson no longer known is dropped)."""
        try:
            data = json.loads(text)
            progress = {k: LessonProgress(**v) for k, v in data["progress"].items() if k in LESSONS}
            current = data["current"] if data["current"] in LESSONS else next(iter(LESSONS))
            return cls(str(data.get("name", "")), current, progress)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(f"not a saved lesson session: {err}") from None
