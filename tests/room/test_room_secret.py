"""The host secret: wrong guesses slow the guesser and are limited server-wide; a weak chosen secret is named."""

from __future__ import annotations

import pytest

from tevcore.room.jobs import JobBoard
from tevcore.room.secret import WRONG_PER_MINUTE, SecretCheck, TooManyGuesses, strength_advice


def test_a_wrong_guess_makes_the_guesser_wait_before_the_next_is_checked():
    now = [0.0]
    check = SecretCheck("right-one", clock=lambda: now[0])
    assert not check.check("guess 1", "ann")
    with pytest.raises(TooManyGuesses, match=r"^too many wrong guesses of the host secret: try again in 1 s$"):
        check.check("right-one", "ann")  # refused unchecked, even when right
    assert not check.check("guess 1", "bob")  # another guesser is not slowed by ann
    now[0] = 1.0
    assert not check.check("guess 2", "ann")
    now[0] = 2.5
    with pytest.raises(TooManyGuesses, match="try again in 1 s"):  # the wait doubles: 2 s after the second
        check.check("guess 3", "ann")
    now[0] = 3.0
    assert check.check("right-one", "ann")


def test_the_server_checks_at_most_its_wrong_guesses_a_minute_whoever_guesses():
    now = [0.0]
    check = SecretCheck("right-one", clock=lambda: now[0])
    for guesser in range(WRONG_PER_MINUTE):  # a new browser session per guess
        assert not check.check("wrong", f"session {guesser}")
    with pytest.raises(TooManyGuesses, match="try again in 60 s"):
        check.check("right-one", "the host")
    now[0] = 60.0
    assert check.check("right-one", "the host")


def test_the_job_board_unlocks_through_the_limited_check(tmp_path):
    board = JobBoard(tmp_path / "jobs.json", 1, "s3cret-of-the-host")
    assert not board.unlock("wrong", guesser="p")
    with pytest.raises(TooManyGuesses):
        board.unlock("s3cret-of-the-host", guesser="p")
    assert board.unlock("s3cret-of-the-host", guesser="host")
    assert not JobBoard(tmp_path / "other.json", 1, None).unlock("", guesser="p")


def test_a_weak_host_secret_gets_advice_and_a_made_one_does_not():
    advice = strength_advice("hunter2")
    assert advice.startswith("the host secret is weak (7 characters, 7 distinct, at most about 36 bits)")
    assert "12 or more random" in advice
    assert strength_advice("Zq8kP2mWx7rT4vB") is None  # 15 characters of letters and digits: about 89 bits
    assert strength_advice("ab" * 20) is not None  # long, but a pattern of two characters
    assert strength_advice("") is not None
