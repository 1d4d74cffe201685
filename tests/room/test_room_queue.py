"""The compute queue: never more than K at once, first in first out, places shown, a newer request replaces."""

from __future__ import annotations

import threading
import time

import pytest

from tevcore.room.queue import ComputeQueue, Place, Replaced


def wait_until(condition, timeout=5.0):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.005)


def hold_a_turn(queue: ComputeQueue, owner: str) -> tuple[threading.Thread, threading.Event]:
    """A thread holding `owner`'s turn (once granted) until the returned event is set."""
    release = threading.Event()

    def holder():
        with queue.turn(owner):
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    return thread, release


def test_at_most_k_turns_run_at_once_and_every_request_gets_one():
    queue = ComputeQueue(2)
    lock = threading.Lock()
    inside, most, done = [0], [0], []

    def work(owner):
        with queue.turn(owner, poll_s=0.01):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 1
        done.append(owner)

    threads = [threading.Thread(target=work, args=(f"p{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most[0] == 2 and sorted(done) == sorted(f"p{i}" for i in range(8))
    assert queue.running == 0 and queue.waiting == 0


def test_waiting_requests_are_told_their_place_and_served_in_order():
    queue = ComputeQueue(1, clock=lambda: 0.0)
    places: dict[str, list[Place]] = {"b": [], "c": []}
    order = []

    def waiter(owner):
        with queue.turn(owner, on_wait=places[owner].append, poll_s=0.01):
            order.append(owner)

    first, release = hold_a_turn(queue, "a")
    wait_until(lambda: queue.running == 1)
    b = threading.Thread(target=waiter, args=("b",))
    b.start()
    wait_until(lambda: queue.waiting == 1)
    c = threading.Thread(target=waiter, args=("c",))
    c.start()
    wait_until(lambda: places["c"])
    release.set()
    for thread in (first, b, c):
        thread.join(5)
    assert order == ["b", "c"]
    assert places["b"][0].position == 1 and places["c"][0] == Place(2, 2, places["c"][0].estimate_s)
    assert "place 2 of 2 in line" in places["c"][0].text()


def test_a_participants_new_request_replaces_their_queued_one_in_its_place():
    queue = ComputeQueue(1)
    outcome = {}

    def ask(name, owner):
        try:
            with queue.turn(owner, poll_s=0.01):
                outcome[name] = "ran"
        except Replaced as err:
            outcome[name] = str(err)

    _, release = hold_a_turn(queue, "host")
    wait_until(lambda: queue.running == 1)
    threads = [threading.Thread(target=ask, args=("old", "p"))]
    threads[0].start()
    wait_until(lambda: queue.waiting == 1)
    threads.append(threading.Thread(target=ask, args=("other", "q")))
    threads[1].start()
    wait_until(lambda: queue.waiting == 2)
    threads.append(threading.Thread(target=ask, args=("new", "p")))
    threads[2].start()
    wait_until(lambda: "old" in outcome)
    assert queue.waiting == 2  # p's newer request stands where the older one stood, no stacking
    release.set()
    for thread in threads:
        thread.join(5)
    assert outcome == {"old": "replaced by your newer request", "other": "ran", "new": "ran"}


def test_a_waiter_stopped_by_its_page_leaves_the_line():
    queue = ComputeQueue(1)
    thread, release = hold_a_turn(queue, "a")
    wait_until(lambda: queue.running == 1)

    def stopped(place):
        raise KeyboardInterrupt  # what a page's stop does inside the wait callback

    with pytest.raises(KeyboardInterrupt):
        with queue.turn("b", on_wait=stopped):
            pass
    assert queue.waiting == 0
    release.set()
    thread.join(5)
    assert queue.running == 0


def test_the_estimate_follows_the_measured_turns():
    now = [0.0]
    queue = ComputeQueue(1, clock=lambda: now[0])
    with queue.turn("a"):
        now[0] += 4.0
    seen = []
    thread, release = hold_a_turn(queue, "a")
    wait_until(lambda: queue.running == 1)

    def look(place):
        seen.append(place)
        release.set()

    with queue.turn("b", on_wait=look, poll_s=0.01):
        pass
    thread.join(5)
    assert seen[0].estimate_s == 4.0


def test_a_queue_without_slots_is_refused():
    with pytest.raises(ValueError, match="at least one slot"):
        ComputeQueue(0)


def test_three_tabs_of_one_participant_hold_one_place_and_others_pass_them():
    """One participant (one owner key in all their tabs) runs one turn at a time and stands in line once: with
    slots free, their second and third tab's requests do not take them, another participant's request does."""
    queue = ComputeQueue(3)
    first, release_first = hold_a_turn(queue, "ann")  # ann's first tab runs
    wait_until(lambda: queue.running == 1)
    outcome: dict[str, str] = {}

    def tab(label: str, owner: str) -> None:
        try:
            with queue.turn(owner, poll_s=0.01):
                outcome[label] = "ran"
        except Replaced:
            outcome[label] = "replaced"

    second = threading.Thread(target=tab, args=("ann 2", "ann"))
    second.start()
    wait_until(lambda: queue.waiting == 1)
    third = threading.Thread(target=tab, args=("ann 3", "ann"))
    third.start()
    wait_until(lambda: "ann 2" in outcome)  # the newer tab takes the older one's place
    assert outcome == {"ann 2": "replaced"} and queue.waiting == 1 and queue.running == 1  # two slots stay free
    other = threading.Thread(target=tab, args=("bob", "bob"))
    other.start()
    other.join(5)
    assert outcome["bob"] == "ran" and "ann 3" not in outcome  # bob passed ann's waiting tab
    release_first.set()
    for thread in (first, third):
        thread.join(5)
    assert outcome["ann 3"] == "ran" and queue.running == 0 and queue.waiting == 0


def test_a_turn_left_by_an_exception_frees_the_slot_for_the_next_participant():
    """A closed tab stops its work with an exception inside the turn (`tevcore.studio.turns.Left`): the slot is
    free at once and the participant can ask again."""
    queue = ComputeQueue(1)
    with pytest.raises(RuntimeError):
        with queue.turn("ann"):
            raise RuntimeError("the page that asked was closed")
    assert queue.running == 0
    for owner in ("bob", "ann"):
        with queue.turn(owner, on_wait=lambda place: pytest.fail("the slot was still held")):
            pass
