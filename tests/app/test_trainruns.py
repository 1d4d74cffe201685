"""The app's view of training runs: status reading, ETA, refusal of a busy folder, the CLI command and plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import trainruns


def _status(folder: Path, **fields) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"data": "x"}))
    (folder / "status.json").write_text(json.dumps(fields))


def test_running_run_has_progress_and_eta(tmp_path):
    _status(tmp_path / "r", state="running", pid=os.getpid(), step=25, total_steps=100, started=0.0, updated=50.0)
    info = trainruns.run_info(tmp_path / "r")
    assert info.running and info.fraction == 0.25
    assert info.eta_seconds == pytest.approx(150.0)
    assert "already training" in trainruns.busy_reason(tmp_path / "r")


def test_dead_process_is_reported_crashed_and_resumable(tmp_path):
    _status(tmp_path / "r", state="running", pid=2**22 + 4321, step=3, total_steps=10, started=0.0, updated=3.0)
    info = trainruns.run_info(tmp_path / "r")
    assert info.state == "crashed" and info.resumable and "gone" in info.error
    assert trainruns.busy_reason(tmp_path / "r") is None


def test_corrupt_or_missing_files_are_reported_not_raised(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "status.json").write_text("{oops")
    assert trainruns.run_info(tmp_path / "bad").state == "unreadable"
    (tmp_path / "bad" / "metrics.jsonl").write_text('{"step": 1, "loss": 2}\n{"step": 2, "lo')
    assert len(trainruns.metrics_frame(tmp_path / "bad")) == 1
    assert trainruns.list_runs(tmp_path / "nowhere") == []
    table = trainruns.runs_table(trainruns.list_runs(tmp_path))
    assert table["state"].tolist() == ["unreadable"]


def test_a_live_lock_refuses_a_second_start(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / ".lock").write_text(str(os.getpid()))
    assert "in use" in trainruns.busy_reason(folder)
    (folder / ".lock").write_text(str(2**22 + 999))  # a stale lock does not block
    assert trainruns.busy_reason(folder) is None


def test_finished_run_is_not_restarted(tmp_path):
    _status(tmp_path / "done", state="finished", pid=1, step=10, total_steps=10, started=0.0, updated=9.0)
    assert "finished" in trainruns.busy_reason(tmp_path / "done")


def test_command_uses_the_cli_flags_and_the_plan_validates(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"shards": 3, "target_name": "tiny"}))
    cmd = trainruns.build_command(tmp_path / "run", {"data": str(data), "steps": 5, "tree_lambda": 0.1,
                                                     "tree_anchors": 2, "tree_weight": "exit", "max_shards": None})
    assert cmd[1:4] == ["-m", "tevcore", "train"] and cmd[4] == str(tmp_path / "run")
    assert "--tree-lambda" in cmd and "--max-shards" not in cmd
    ok, text = trainruns.plan(cmd)
    assert ok and "ExitTrain" in text and "3 shards" in text
    ok, text = trainruns.plan(trainruns.build_command(tmp_path / "run", {"data": str(data), "tree_lambda": 0.1,
                                                                         "tree_anchors": 0}))
    assert not ok and "tree_anchors" in text
    with pytest.raises(ValueError, match="no option"):
        trainruns.build_command(tmp_path / "run", {"not_a_field": 1})


def test_finished_processes_are_reaped(tmp_path):
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    procs = {"run": proc}
    deadline = time.time() + 30
    finished = []
    while not finished and time.time() < deadline:
        finished = trainruns.reap(procs)
        time.sleep(0.05)
    assert finished == [("run", 0)] and proc.returncode == 0  # waited for: no <defunct> left behind
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)


def _drafter(folder: Path, payload: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(payload)
    return folder


def test_identical_weight_files_are_found_and_compare_starts_with_two_drafters(tmp_path):
    a = _drafter(tmp_path / "run" / "checkpoint-20", b"weights A")
    b = _drafter(tmp_path / "run" / "drafter", b"weights A")
    c = _drafter(tmp_path / "other", b"weights C")
    assert trainruns.identical_weights([str(a), str(b), str(c)]) == [(str(a), str(b))]
    assert trainruns.identical_weights([str(a), str(c)]) == []
    (tmp_path / "run" / "config.json").write_text("{}")
    pair = trainruns.default_comparison(trainruns.list_runs(tmp_path))
    assert pair == [str(b), str(trainruns.DEFAULT_DRAFTER)]  # the newest checkpoint against the committed drafter
    assert trainruns.identical_weights(pair) == []
