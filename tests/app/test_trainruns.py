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
    _status(tmp_path / "r", state="running", pid=os.getpid(), step=25, total_steps=100, started=0.0, updated=60.0,
            steps_began=10.0, start_step=0, active_seconds=60.0)
    info = trainruns.run_info(tmp_path / "r")
    assert info.running and info.fraction == 0.25
    assert info.eta_seconds == pytest.approx(150.0)  # 2 s a step since the first step, 75 steps left
    assert "already training" in trainruns.busy_reason(tmp_path / "r")


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
    stopped = trainruns.run_info(run)
    assert stopped.shown_state == "stopped (resumable)" and stopped.resumable and stopped.eta_seconds is None
    assert not stopped.running and stopped.error is None
    now[0] += 3600.0  # an hour stopped
    second = rundir.RunClock.begin(run)
    now[0] += 4.0  # the new process loads
    second.steps_begin()
    now[0] += 5.0
    rundir.write_status(run, "running", 105, 200, second)
    info = trainruns.run_info(run)
    assert info.state == "running" and info.active_seconds == pytest.approx(109.0)
    assert info.eta_seconds == pytest.approx(95.0)  # 1 s a step, 95 steps left (a pace over all 105 steps: 10 s)


def test_a_stopped_run_is_stopped_not_crashed_and_has_no_eta(tmp_path):
    _status(tmp_path / "r", state="interrupted", pid=2**22 + 4321, step=30, total_steps=100, started=0.0,
            updated=30.0, steps_began=1.0, start_step=0, active_seconds=30.0)
    info = trainruns.run_info(tmp_path / "r")  # its process is gone, as a stopped run's is
    assert info.state == "interrupted" and info.shown_state == "stopped (resumable)" and info.resumable
    assert info.eta_seconds is None and info.error is None
    assert trainruns.runs_table([info])["state"].tolist() == ["stopped (resumable)"]


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
    (data / "manifest.json").write_text(json.dumps({"shards": 3, "target_name": "tiny", "config": {}}))
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
    (a / "trainer.pt").write_bytes(b"x")
    (tmp_path / "run" / "latest.json").write_text(json.dumps({"checkpoint": "checkpoint-20", "step": 20}))
    b = _drafter(tmp_path / "run" / "drafter", b"weights A")
    c = _drafter(tmp_path / "other", b"weights C")
    assert trainruns.identical_weights([str(a), str(b), str(c)]) == [(str(a), str(b))]
    assert trainruns.identical_weights([str(a), str(c)]) == []
    (tmp_path / "run" / "config.json").write_text("{}")
    pair = trainruns.default_comparison(trainruns.list_runs(tmp_path))
    assert pair == [str(b), str(trainruns.DEFAULT_DRAFTER)]  # the newest checkpoint against the committed drafter
    assert trainruns.identical_weights(pair) == []


def test_data_progress_comes_from_the_builds_own_plan(tmp_path):
    from tevcore.train.data import MANIFEST, shard_path

    folder = tmp_path / "set"
    folder.mkdir()
    assert trainruns.data_progress(folder) is None  # no plan yet: no guess from an input box
    (folder / MANIFEST).write_text(json.dumps({"shards": 1, "config": {}, "target_name": "tiny"}))
    shard_path(folder, 0).write_bytes(b"x")
    assert trainruns.data_progress(folder) == (1, 1)  # finished, whatever the page's shards box says now
    (folder / MANIFEST).write_text(json.dumps({"shards": 3, "config": {}, "target_name": "tiny"}))
    assert trainruns.data_progress(folder) == (1, 3)
    (folder / MANIFEST).write_text("{torn")
    assert trainruns.data_progress(folder) is None


def test_the_pages_build_makes_the_kind_of_set_the_default_fine_tune_was_measured_on(tmp_path):
    """Issue 42: the default fine-tuning recipe was measured not to hurt the committed drafter on a set of the
    target's own responses; the page's Build (read back through build-data's own parser) makes that kind of set."""
    import argparse

    from tevcore.results import read_result
    from tevcore.train.data_cli import add_arguments, config_from_args
    from tevcore.train.recipes import recipe

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    command = trainruns.data_command(tmp_path / "data-small", 2)
    config = config_from_args(parser.parse_args(command[command.index("build-data") + 1:]))
    fine = recipe(fine_tune=True, short=True)
    notes = Path(trainruns.__file__).resolve().parents[1] / "assets" / "notes" / "issue-42"
    records = [read_result(path) for path in sorted(notes.glob("paired-*.json"))]
    measured = [r.settings["training_data"] for r in records if "training_data" in r.settings
                and all(r.settings["training"][name] == fine[name] for name in ("lr", "steps", "warmup"))]
    assert measured, "no committed paired comparison was measured with the default fine-tuning recipe"
    for built in measured:
        assert (config.generate, config.text_pairs, config.python_files) == (
            built["generate"], built["text_pairs"], built["python_files"])


def test_paired_table_counts_the_prompts_a_meaningful_standard_error_needs():
    import drafter_compare
    from tevcore.train.eval import PairedCell, prompts_for_se

    cell = PairedCell(1.0, 8, "all", 6, 180, "A", "B", 2.0, 2.04, 0.04, 0.03)
    assert prompts_for_se(cell, 0.01) == 54  # 6 * (0.03 / 0.01)^2
    assert prompts_for_se(PairedCell(1.0, 8, "all", 1, 30, "A", "B", 2.0, 2.1, 0.1, float("nan")), 0.01) is None
    table = drafter_compare.paired_table([cell], resolution=0.01, sets=3)
    row = table.iloc[0]
    assert row["prompts per set for s.e. ≤ δ/2"] == 18  # s.e. <= 1% of E(A) / 2 = 0.01: 54 prompts over 3 sets
    assert row["prompts per set to resolve B - A"] == 5  # s.e. <= 0.04 / 2: ceil(6 * 2.25) = 14 -> 5 per set
    assert row["B - A %"] == pytest.approx(2.0)


def test_the_paired_command_is_the_clis(tmp_path):
    import drafter_compare
    from tevcore.train.eval_cli import add_arguments
    import argparse

    cmd = drafter_compare.paired_command("a", "b", [8, 16], 4, 1.0, 32, lookup=True)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(cmd[4:])
    assert (args.drafter, args.compare, args.budgets, args.per_set, args.lookup) == ("a", ["b"], "8,16", 4, True)
    assert args.temperatures == "1" and args.sample_sets == "mt-bench,humaneval,gsm8k"
    greedy = parser.parse_args(drafter_compare.paired_command("a", "b", [8], 2, 0.0, 16, lookup=False)[4:])
    assert greedy.greedy_sets == "humaneval" and not greedy.lookup


def test_the_plan_check_never_swaps_the_process_streams(tmp_path, monkeypatch):
    """Another session's output must not land in this plan, nor this plan anywhere else: sys.stdout and
    sys.stderr stay the objects they were while the plan is made, for a good plan and a refused option."""
    import sys

    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"shards": 2, "target_name": "tiny", "config": {}}))
    seen = []

    class Watch:
        def __init__(self, name):
            self.name = name

        def write(self, text):
            seen.append((self.name, text))
            return len(text)

        def flush(self):
            pass

    out, err = Watch("stdout"), Watch("stderr")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    from tevcore.train import train_cli

    streams_while_planning = []
    reading = train_cli.config_from_args

    def watched(args):  # what another thread printing now would write to
        streams_while_planning.append((sys.stdout is out, sys.stderr is err))
        return reading(args)

    monkeypatch.setattr(train_cli, "config_from_args", watched)
    ok, text = trainruns.plan(trainruns.build_command(tmp_path / "run", {"data": str(data), "steps": 5}))
    bad_ok, bad_text = trainruns.plan([*trainruns.build_command(tmp_path / "run", {"data": str(data)}),
                                       "--steps", "many"])
    assert streams_while_planning == [(True, True)]
    assert sys.stdout is out and sys.stderr is err
    assert seen == []  # nothing printed to the process's streams
    assert ok and "2 shards planned" in text
    assert not bad_ok and "--steps" in bad_text and "many" in bad_text
