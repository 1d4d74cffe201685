"""Run folders seen from outside the training process: status, ETA, a busy folder, a data build's progress."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tevcore.train import runs


def _status(folder: Path, **fields) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"data": "x"}))
    (folder / "status.json").write_text(json.dumps(fields))


def test_running_run_has_progress_and_eta(tmp_path):
    _status(tmp_path / "r", state="running", pid=os.getpid(), step=25, total_steps=100, started=0.0, updated=60.0,
            steps_began=10.0, start_step=0, active_seconds=60.0)
    info = runs.run_info(tmp_path / "r")
    assert info.running and info.fraction == 0.25
    assert info.eta_seconds == pytest.approx(150.0)  # 2 s a step since the first step, 75 steps left
    assert "already training" in runs.busy_reason(tmp_path / "r")


def _clock(monkeypatch):
    from tevcore.train import rundir

    now = [1000.0]
    monkeypatch.setattr(rundir.time, "time", lambda: now[0])
    return rundir, now


def test_a_resumed_run_shows_the_elapsed_time_of_every_process_and_its_own_pace(tmp_path, monkeypatch):
    """What the engine writes (`rundir`), read as the page reads it: the case of 'step 105/200, ETA 0m09s'."""
    rundir, now = _clock(monkeypatch)
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": "x"}))
    first = rundir.RunClock.begin(run)
    first.steps_begin()
    now[0] += 100.0  # 1 s a step
    rundir.write_status(run, "interrupted", 100, 200, first)
    (run / rundir.LATEST).write_text(json.dumps({"checkpoint": "checkpoint-100", "step": 100}))
    stopped = runs.run_info(run)
    assert stopped.shown_state == "stopped (resumable)" and stopped.resumable and stopped.eta_seconds is None
    assert not stopped.running and stopped.error is None
    now[0] += 3600.0  # an hour stopped
    second = rundir.RunClock.begin(run)
    now[0] += 4.0  # the new process loads
    second.steps_begin()
    now[0] += 5.0
    rundir.write_status(run, "running", 105, 200, second)
    info = runs.run_info(run)
    assert info.state == "running" and info.active_seconds == pytest.approx(109.0)
    assert info.eta_seconds == pytest.approx(95.0)  # 1 s a step, 95 steps left (a pace over all 105 steps: 10 s)


def test_a_stopped_run_is_stopped_not_crashed_and_has_no_eta(tmp_path):
    _status(tmp_path / "r", state="interrupted", pid=2**22 + 4321, step=30, total_steps=100, started=0.0,
            updated=30.0, steps_began=1.0, start_step=0, active_seconds=30.0)
    info = runs.run_info(tmp_path / "r")  # its process is gone, as a stopped run's is
    assert info.state == "interrupted" and info.shown_state == "stopped (resumable)" and info.resumable
    assert info.eta_seconds is None and info.error is None


def test_dead_process_is_reported_crashed_and_resumable(tmp_path):
    _status(tmp_path / "r", state="running", pid=2**22 + 4321, step=3, total_steps=10, started=0.0, updated=3.0)
    info = runs.run_info(tmp_path / "r")
    assert info.state == "crashed" and info.resumable and "gone" in info.error
    assert runs.busy_reason(tmp_path / "r") is None


def test_corrupt_or_missing_files_are_reported_not_raised(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "status.json").write_text("{oops")
    assert runs.run_info(tmp_path / "bad").state == "unreadable"
    assert runs.list_runs(tmp_path / "nowhere") == []
    assert [r.state for r in runs.list_runs(tmp_path)] == ["unreadable"]


def test_runs_and_data_sets_are_told_apart_and_runs_come_newest_first(tmp_path):
    _status(tmp_path / "old", state="finished", step=1, total_steps=1, updated=10.0)
    _status(tmp_path / "new", state="finished", step=1, total_steps=1, updated=20.0)
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "manifest.json").write_text(json.dumps({"shards": 1, "config": {}, "target_name": "tiny"}))
    assert [r.folder.name for r in runs.list_runs(tmp_path)] == ["new", "old"]
    assert runs.data_sets(tmp_path) == [tmp_path / "set"]


def test_a_live_lock_refuses_a_second_start(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / ".lock").write_text(str(os.getpid()))
    assert "in use" in runs.busy_reason(folder)
    (folder / ".lock").write_text(str(2**22 + 999))  # a stale lock does not block
    assert runs.busy_reason(folder) is None


def test_finished_run_is_not_restarted(tmp_path):
    _status(tmp_path / "done", state="finished", pid=1, step=10, total_steps=10, started=0.0, updated=9.0)
    assert "finished" in runs.busy_reason(tmp_path / "done")


def test_data_progress_comes_from_the_builds_own_plan(tmp_path):
    from tevcore.train.data import MANIFEST, shard_path

    folder = tmp_path / "set"
    folder.mkdir()
    assert runs.data_progress(folder) is None  # no plan yet: no guess from an input box
    (folder / MANIFEST).write_text(json.dumps({"shards": 1, "config": {}, "target_name": "tiny"}))
    shard_path(folder, 0).write_bytes(b"x")
    assert runs.data_progress(folder) == (1, 1)  # finished, whatever the page's shards box says now
    (folder / MANIFEST).write_text(json.dumps({"shards": 3, "config": {}, "target_name": "tiny"}))
    assert runs.data_progress(folder) == (1, 3)
    (folder / MANIFEST).write_text("{torn")
    assert runs.data_progress(folder) is None


def test_the_log_tail_keeps_the_last_state_of_a_rewritten_line(tmp_path):
    (tmp_path / runs.LOG_NAME).write_text("loading\nstep 1\rstep 2\rstep 3\ndone\n")
    assert runs.log_tail(tmp_path, lines=2) == "step 3\ndone"
    assert runs.log_tail(tmp_path / "nowhere") == ""
