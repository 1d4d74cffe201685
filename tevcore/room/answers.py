"""The room's answers to the lessons, shared across the server's sessions, and the host's pace.

A participant's session is private to their browser, so what the host sees of the room lives here: per room,
each participant's latest answer to each lesson (anonymous: a name they chose or a short id of their session),
and whether the room goes together (the host opens lessons one by one) or at each participant's own pace. One
lock guards it; it holds only the latest answer per participant and lesson, so it stays small.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields


ANONYMOUS = re.compile(r"^p-[0-9a-f]{6}$")


def anonymous_name(owner: str) -> str:
    """The name a participant answers under until they choose one: a short id that says nothing of their session
    key (which stays secret)."""
    return "p-" + hashlib.sha256(owner.encode()).hexdigest()[:6]


@dataclass(frozen=True)
class RoomAnswer:
    """One participant's latest checked answer to one lesson."""

    participant: str
    lesson: str
    prediction: float | str
    truth: float | str
    correct: bool
    attempt: int
    at: float  # seconds since the epoch


@dataclass(frozen=True)
class Pace:
    """`together`: participants see the lessons the host opened (the first `opened`); else each goes at their own
    pace through all of them."""

    together: bool = False
    opened: int = 1


class AnswerBoard:
    """The answers and the pace of every room this server hosts, keyed by the room's name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[str, dict[tuple[str, str], RoomAnswer]] = {}
        self._pace: dict[str, Pace] = {}
        self._names: dict[str, dict[str, str]] = {}  # room -> chosen name -> the session key that holds it

    def record(self, room: str, participant: str, lesson: str, prediction: float | str, truth: float | str,
               correct: bool, attempt: int) -> RoomAnswer:
        """Keep `participant`'s answer to `lesson` (a later attempt replaces an earlier one)."""
        answer = RoomAnswer(participant, lesson, prediction, truth, bool(correct), int(attempt), time.time())
        with self._lock:
            self._answers.setdefault(room, {})[(participant, lesson)] = answer
        return answer

    def rename(self, room: str, owner: str, old: str, new: str) -> None:
        """The participant whose session key is `owner` now answers as `new` instead of `old`: their answers
        follow. A name another session holds is refused (ValueError), so nobody's answers can be overwritten."""
        with self._lock:
            names = self._names.setdefault(room, {})
            if names.get(new, owner) != owner or (ANONYMOUS.match(new) and new != anonymous_name(owner)):
                raise ValueError(f"the name {new!r} is taken in this room: choose another")
            for name in [n for n, holder in names.items() if holder == owner]:
                del names[name]
            names[new] = owner
            answers = self._answers.get(room, {})
            for key in [k for k in answers if k[0] == old]:
                answer = answers.pop(key)
                answers[(new, key[1])] = RoomAnswer(new, *astuple(answer)[1:])

    def answers(self, room: str, lesson: str | None = None) -> list[RoomAnswer]:
        """The room's answers (to `lesson` only, when named), oldest first."""
        with self._lock:
            found = [a for a in self._answers.get(room, {}).values() if lesson is None or a.lesson == lesson]
        return sorted(found, key=lambda a: a.at)

    def csv(self, room: str, lessons: Sequence[str] = ()) -> str:
        """The room's anonymous answers as CSV (one row per participant and lesson, in `lessons`' order)."""
        order = {key: i for i, key in enumerate(lessons)}
        rows = sorted(self.answers(room), key=lambda a: (order.get(a.lesson, len(order)), a.participant))
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([f.name for f in fields(RoomAnswer)])
        for answer in rows:
            writer.writerow([time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(answer.at)) if f.name == "at"
                             else getattr(answer, f.name) for f in fields(RoomAnswer)])
        return out.getvalue()

    def pace(self, room: str) -> Pace:
        with self._lock:
            return self._pace.get(room, Pace())

    def set_pace(self, room: str, together: bool) -> Pace:
        with self._lock:
            pace = self._pace[room] = Pace(bool(together), self._pace.get(room, Pace()).opened)
        return pace

    def open_next(self, room: str, total: int) -> Pace:
        """The host opens the next lesson for everyone (up to `total`)."""
        with self._lock:
            now = self._pace.get(room, Pace())
            pace = self._pace[room] = Pace(now.together, min(total, now.opened + 1))
        return pace
