"""The run folder's status clock and readers: what a resumed run writes, and what a reader can rely on."""

from __future__ import annotations

import json

import pytest

from tevcore.train import rundir


@pytest.fixture
def clock_time(monkeypatch):
    """A settable wall clock for the run folder code."""
    now = [1000.0]
    monkeypatch.setattr(rundir.time, "time", lambda: now[0])
    return now


def test_a_resumed_process_keeps_the_earlier_active_seconds_and_starts_at_its_checkpoint(tmp_path, clock_time):
    first = rundir.RunClock.begin(tmp_path)
    assert (first.earlier_seconds, first.start_step, first.steps_began) == (0.0, 0, None)
    rundir.write_status(tmp_path, "starting", first.start_step, 200, first)
    clock_time[0] += 5  # loading
    first.steps_begin()
    clock_time[0] += 100
    rundir.write_status(tmp_path, "crashed", 100, 200, first, error="RuntimeError: boom")
    (tmp_path / rundir.LATEST).write_text(json.dumps({"checkpoint": "checkpoint-100", "step": 100}))
    clock_time[0] = 9000.0  # hours with no process: not on the run's clock
    second = rundir.RunClock.begin(tmp_path)
    assert (second.earlier_seconds, second.start_step) == (105.0, 100)
    rundir.write_status(tmp_path, "starting", second.start_step, 200, second)
    status = rundir.read_status(tmp_path)
    assert "error" not in status  # the earlier process's error is gone with its status
    assert (status["state"], status["step"], status["active_seconds"]) == ("starting", 100, 105.0)
    clock_time[0] += 3
    second.steps_begin()
    clock_time[0] += 10
    rundir.write_status(tmp_path, "running", 105, 200, second)
    status = rundir.read_status(tmp_path)
    assert status["active_seconds"] == 118.0 and status["start_step"] == 100 and status["steps_began"] == 9003.0
    assert status["started"] == 9000.0 and status["updated"] == 9013.0


def test_readers_give_nothing_for_missing_or_damaged_files(tmp_path):
    assert rundir.read_status(tmp_path) == {} and rundir.done_steps(tmp_path) == 0
    assert rundir.checkpoint_step(tmp_path) == 0 and rundir.usable_drafters(tmp_path) == []
    for damaged in ("{torn", "[1, 2]"):
        (tmp_path / rundir.STATUS).write_text(damaged)
        assert rundir.read_status(tmp_path) == {}
    (tmp_path / rundir.LATEST).write_text("not json")
    assert rundir.checkpoint_step(tmp_path) == 0 and rundir.usable_drafters(tmp_path) == []
    assert rundir.RunClock.begin(tmp_path).earlier_seconds == 0.0  # a torn status costs the count, not the run


def test_usable_drafters_follow_latest_json_not_a_glob(tmp_path):
    for name in ("checkpoint-2", "checkpoint-4", "drafter"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "checkpoint-4" / rundir.TRAINER_STATE).write_bytes(b"x")
    assert rundir.usable_drafters(tmp_path) == [tmp_path / "drafter"]  # no pointer: no checkpoint is vouched for
    (tmp_path / rundir.LATEST).write_text(json.dumps({"checkpoint": "checkpoint-4", "step": 4}))
    assert rundir.usable_drafters(tmp_path) == [tmp_path / "checkpoint-4", tmp_path / "drafter"]
    (tmp_path / rundir.LATEST).write_text(json.dumps({"checkpoint": "checkpoint-2", "step": 2}))  # incomplete
    assert rundir.usable_drafters(tmp_path) == [tmp_path / "drafter"]


def test_lock_holder_names_a_live_owner_only(tmp_path):
    import os

    assert rundir.lock_holder(tmp_path) is None
    (tmp_path / ".lock").write_text(str(os.getpid()))
    assert rundir.lock_holder(tmp_path) == os.getpid()
    (tmp_path / ".lock").write_text(str(2**22 + 999))
    assert rundir.lock_holder(tmp_path) is None
