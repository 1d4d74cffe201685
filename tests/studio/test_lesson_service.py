"""The lessons' service: a truth computed once however many ask at once, a heavy one in a compute-queue turn,
predictions parsed once, and a participant's progress (commit, run, retry) as one object that survives JSON."""

from __future__ import annotations

import threading

import pytest

from tevcore.room.queue import ComputeQueue
from tevcore.studio import lesson_service as service
from tevcore.studio.lesson_service import LessonRequest, LessonSession, ProgressError, TruthCache
from tevcore.studio.lessons import LESSONS, Lesson


class CountingQueue(ComputeQueue):
    def __init__(self) -> None:
        super().__init__(1)
        self.turns = 0

    def turn(self, owner, on_wait=None, poll_s=0.5):
        self.turns += 1
        return super().turn(owner, on_wait, poll_s)


def test_twenty_participants_asking_at_once_cost_one_computation_in_one_queue_turn(monkeypatch):
    calls = []
    slow = threading.Event()
    heavy = LESSONS["naive-chi-square"]

    def truth():
        calls.append(1)
        slow.wait(0.2)  # the others arrive while it computes
        return heavy.truth()

    monkeypatch.setitem(LESSONS, heavy.key, Lesson(**{**heavy.__dict__, "truth": truth}))
    queue = CountingQueue()
    cache = TruthCache(queue)
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(cache.truth(heavy.key, f"p{i}")))
               for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 20 and len(calls) == 1 and cache.computations == 1 and queue.turns == 1
    assert all(r is results[0] for r in results)


def test_a_light_truth_takes_no_queue_turn_and_a_heavy_one_does():
    queue = CountingQueue()
    cache = TruthCache(queue)
    cache.truth("largest-x", "me")
    assert queue.turns == 0
    cache.truth("optimal-length", "me")
    assert queue.turns == 1


def test_a_prediction_is_parsed_once_with_a_plain_message():
    assert LessonRequest.of("coupling", "0.75").prediction == 0.75
    with pytest.raises(ValueError, match="must be a number"):
        LessonRequest.of("coupling", "three quarters")
    with pytest.raises(ValueError, match="no lesson 'nope'"):
        LessonRequest.of("nope", 1)


def test_commit_run_check_retry_and_the_session_survives_json():
    cache = TruthCache()
    session = LessonSession(name="ada")
    with pytest.raises(ProgressError, match="commit a prediction"):
        session.request("bonus-token")
    session.commit(LessonRequest.of("bonus-token", 0.5))
    with pytest.raises(ProgressError, match="already committed"):
        session.commit(LessonRequest.of("bonus-token", 0.75))
    check = cache.check(session.request("bonus-token"), "ada")
    assert not check.correct and check.truth.value == pytest.approx(0.75)
    state = session.reveal(check)
    assert state.revealed and state.correct is False and state.attempts == 1
    session.retry("bonus-token")
    session.commit(LessonRequest.of("bonus-token", 0.74))
    state = session.reveal(cache.check(session.request("bonus-token"), "ada"))
    assert state.correct and state.attempts == 2 and session.solved() == 1
    again = LessonSession.from_json(session.to_json())
    assert again == session
    with pytest.raises(ValueError, match="not a saved lesson session"):
        LessonSession.from_json("{}")


def test_every_choice_lesson_is_checked_by_equality_and_every_number_within_its_tolerance():
    cache = TruthCache()
    for key, found in LESSONS.items():
        truth = cache.truth(key, "me")
        if hasattr(found.answer, "tolerance"):
            off = float(truth.value) + found.answer.tolerance + 0.5
            if off <= found.answer.high:
                assert not cache.check(LessonRequest.of(key, off), "me").correct
        assert cache.check(LessonRequest.of(key, truth.value), "me").correct
    assert service.lesson("coupling") is LESSONS["coupling"]
