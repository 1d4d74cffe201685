"""The room's answer board: latest answer per participant and lesson, safe across threads, renamed with its
participant, exported as CSV; the host's pace."""

from __future__ import annotations

import csv
import io
import threading

import pytest

from tevcore.room.answers import AnswerBoard, anonymous_name


def test_a_later_attempt_replaces_the_earlier_and_rooms_are_apart():
    board = AnswerBoard()
    board.record("r", "ada", "coupling", 0.5, 0.75, False, 1)
    board.record("r", "ada", "coupling", 0.75, 0.75, True, 2)
    board.record("r", "bob", "coupling", 0.7, 0.75, False, 1)
    board.record("other", "eve", "coupling", 0.1, 0.75, False, 1)
    answers = board.answers("r", "coupling")
    assert [(a.participant, a.prediction, a.attempt) for a in answers] == [("ada", 0.75, 2), ("bob", 0.7, 1)]
    assert [a.participant for a in board.answers("other")] == ["eve"]


def test_many_threads_record_at_once_and_none_is_lost():
    board = AnswerBoard()
    threads = [threading.Thread(target=board.record, args=("r", f"p{i}", "bonus-token", 0.75, 0.75, True, 1))
               for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(board.answers("r")) == 50


def test_the_csv_holds_every_answer_anonymously_in_lesson_order_and_a_rename_follows():
    board = AnswerBoard()
    board.record("r", "p-1a2b3c", "bonus-token", 0.75, 0.75, True, 1)
    board.record("r", "p-1a2b3c", "largest-x", "5 ' big'", "5 ' big'", True, 1)
    board.rename("r", "key-of-ada", "p-1a2b3c", "ada")
    rows = list(csv.DictReader(io.StringIO(board.csv("r", ["largest-x", "bonus-token"]))))
    assert [(r["participant"], r["lesson"], r["correct"]) for r in rows] == [
        ("ada", "largest-x", "True"), ("ada", "bonus-token", "True")]


def test_a_name_another_session_holds_is_refused_and_its_answers_stay_theirs():
    board = AnswerBoard()
    board.rename("r", "key-of-ada", "p-aaaaaa", "ada")
    board.record("r", "ada", "coupling", 0.75, 0.75, True, 1)
    board.record("r", "p-bbbbbb", "coupling", 0.1, 0.75, False, 1)
    with pytest.raises(ValueError, match="the name 'ada' is taken in this room"):
        board.rename("r", "key-of-bob", "p-bbbbbb", "ada")
    assert {(a.participant, a.prediction) for a in board.answers("r")} == {("ada", 0.75), ("p-bbbbbb", 0.1)}
    board.rename("r", "key-of-ada", "ada", "ada l.")  # ada's old name is free again
    board.rename("r", "key-of-bob", "p-bbbbbb", "ada")
    assert {(a.participant, a.prediction) for a in board.answers("r")} == {("ada l.", 0.75), ("ada", 0.1)}
    with pytest.raises(ValueError, match="is taken"):  # another session's anonymous id is nobody's to choose
        board.rename("r", "key-of-eve", anonymous_name("key-of-eve"), anonymous_name("key-of-bob"))


def test_the_host_opens_lessons_one_by_one_up_to_the_last():
    board = AnswerBoard()
    assert not board.pace("r").together and board.pace("r").opened == 1
    board.set_pace("r", True)
    for _ in range(10):
        board.open_next("r", 7)
    assert board.pace("r").together and board.pace("r").opened == 7
