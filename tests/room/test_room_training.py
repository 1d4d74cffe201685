"""Training control as a service: a training run typed once (`TrainRequest`), its command from the CLI's own flags,
the CLI's plan as a value, starts under the caps (every field that sizes a run) and the job board, stops by owner
or host, and jobs found again after a server restart (both profiles)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pytest

from tevcore.room import training
from tevcore.room.jobs import HOST, JobBoard, JobRefused
from tevcore.room.limits import ROOM, SINGLE_USER, CapExceeded
from tevcore.room.guarded import TRAIN_CAPS, UNSIZED_TRAIN_FIELDS
from tevcore.room.training import Caller, FolderBusy, TrainingControl, TrainRequest
from tevcore.train import train_cli
from tevcore.train.config import TrainConfig
from tevcore.train.recipes import recipe

SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]
ME = Caller("me", is_host=True)  # on one's own machine the user is the host of every job


@pytest.fixture
def controls(tmp_path):
    """`controls(limits)`: a training service on tmp_path's runs folder, as a server makes one at its start; every
    job still running is ended after the test."""
    made = []

    def make(limits=SINGLE_USER, secret=None):
        made.append(TrainingControl(JobBoard(tmp_path / training.REGISTRY, limits.jobs, secret), limits))
        return made[-1]

    yield make
    for control in made:
        control.board.end_all(wait_s=10)


def read_back(words: list[str]) -> argparse.Namespace:
    """What the training process's own parser reads from the words after `tevcore train`."""
    parser = argparse.ArgumentParser(prog="tevcore train")
    train_cli.add_arguments(parser)
    return parser.parse_args(words)


def _data(tmp_path: Path, shards: int = 3) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"shards": shards, "target_name": "tiny", "config": {}}))
    return data


def _wait(condition, seconds: float = 30.0) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_every_recipe_value_reaches_the_cli_as_the_config_it_names(tmp_path):
    """One definition of each flag: the command the service spells is read back by the CLI's own parser into
    exactly the config the values name, for every field of both recipes (booleans and floats included)."""
    for fine in (False, True):
        values = {"data": str(tmp_path), "init": "drafter" if fine else None, **recipe(fine_tune=fine, short=True)}
        values["keep_checkpoints"] = fine  # a boolean spelled both ways
        command = training.train_command(tmp_path / "run", values)
        assert command[1:4] == ["-m", "tevcore", "train"] and command[4] == str(tmp_path / "run")
        args = read_back(command[4:])
        assert train_cli.config_from_args(args) == TrainConfig.from_dict({k: v for k, v in values.items()
                                                                          if v is not None})
    with pytest.raises(ValueError, match="no option for not_a_field"):
        training.train_command(tmp_path / "run", {"not_a_field": 1})


def test_a_request_typed_once_reaches_the_process_as_the_same_config(tmp_path):
    """The form's values become one TrainConfig; the command the job board starts is read back by the CLI's own
    parser into that very config."""
    for fine in (False, True):
        values = {"data": str(tmp_path), "init": "drafter" if fine else None, **recipe(fine_tune=fine, short=True)}
        request = TrainRequest.from_form(tmp_path / "run", values)
        command = request.command()
        assert train_cli.config_from_args(read_back(command[4:])) == request.config
    with pytest.raises(ValueError, match="tree_budget must be a positive integer"):
        TrainRequest.from_form(tmp_path / "run", {"data": "d", "tree_budget": 0})


def test_a_resume_reads_the_runs_saved_config(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": "somewhere", "steps": 7}))
    args = read_back(training.resume_command(run)[4:])
    assert args.out == run and train_cli.config_from_args(args).steps == 7


def test_the_plan_validates_and_refuses_in_one_line(tmp_path):
    data = _data(tmp_path)
    command = training.train_command(tmp_path / "run", {"data": str(data), "steps": 5, "tree_lambda": 0.1,
                                                        "tree_anchors": 2, "tree_weight": "exit", "max_shards": None})
    assert "--tree-lambda" in command and "--max-shards" not in command
    ok, text = training.plan(TrainRequest.from_form(tmp_path / "run", {
        "data": str(data), "steps": 5, "tree_lambda": 0.1, "tree_anchors": 2, "tree_weight": "exit"}))
    assert ok and "ExitTrain" in text and "3 shards" in text
    ok, text = training.plan(TrainRequest(tmp_path / "run", TrainConfig(data=str(tmp_path / "no-such-set"))))
    assert not ok and "no-such-set" in text


def test_the_plan_check_never_swaps_the_process_streams(tmp_path, monkeypatch):
    """Another session's output must not land in this plan, nor this plan anywhere else: sys.stdout and
    sys.stderr stay the objects they were while the plan is made, for a good plan and a refused option."""
    data = _data(tmp_path, shards=2)
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
    streams_while_planning = []
    planning = train_cli.config_plan

    def watched(config):  # what another thread printing now would write to
        streams_while_planning.append((sys.stdout is out, sys.stderr is err))
        return planning(config)

    monkeypatch.setattr(train_cli, "config_plan", watched)
    ok, text = training.plan(TrainRequest.from_form(tmp_path / "run", {"data": str(data), "steps": 5}))
    bad_ok, bad_text = training.plan(TrainRequest.from_form(tmp_path / "run", {"data": str(tmp_path / "none")}))
    assert streams_while_planning == [(True, True), (True, True)]
    assert sys.stdout is out and sys.stderr is err
    assert seen == []  # nothing printed to the process's streams
    assert ok and "2 shards planned" in text
    assert not bad_ok and "none" in bad_text


def test_the_pages_build_makes_the_kind_of_set_the_default_fine_tune_was_measured_on(tmp_path):
    """Issue 42: the default fine-tuning recipe was measured not to hurt the committed drafter on a set of the
    target's own responses; the page's Build (read back through build-data's own parser) makes that kind of set."""
    from tevcore.results import read_result
    from tevcore.train.data_cli import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    command = training.data_command(tmp_path / "data-small", 2)
    args = parser.parse_args(command[command.index("build-data") + 1:])
    config = config_from_args(args)
    assert (args.out, args.max_shards, args.threads) == (tmp_path / "data-small", 2, 1)
    fine = recipe(fine_tune=True, short=True)
    notes = Path(training.__file__).resolve().parents[2] / "assets" / "notes" / "issue-42"
    records = [read_result(path) for path in sorted(notes.glob("paired-*.json"))]
    measured = [r.settings["training_data"] for r in records if "training_data" in r.settings
                and all(r.settings["training"][name] == fine[name] for name in ("lr", "steps", "warmup"))]
    assert measured, "no committed paired comparison was measured with the default fine-tuning recipe"
    for built in measured:
        assert (config.generate, config.text_pairs, config.python_files) == (
            built["generate"], built["text_pairs"], built["python_files"])


def test_a_start_past_a_cap_is_refused_before_anything_runs(controls, tmp_path):
    control = controls(ROOM, secret="s")
    data = _data(tmp_path)
    too_long = TrainRequest.from_form(tmp_path / "run", {"data": str(data), "steps": ROOM.train_steps + 1})
    with pytest.raises(CapExceeded, match="train_steps"):
        control.start_training(Caller("p", is_host=True), too_long)
    with pytest.raises(CapExceeded, match="data_shards"):
        control.build_data(Caller("p", is_host=True), tmp_path / "set", ROOM.data_shards + 1)
    run = tmp_path / "saved"  # a resume is capped by what its saved config would run
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": str(data), "batch_size": ROOM.train_batch + 1}))
    with pytest.raises(CapExceeded, match="train_batch"):
        control.resume(Caller("p", is_host=True), run)
    assert control.board.jobs() == [] and not (tmp_path / "run").exists() and not (tmp_path / "set").exists()
    with pytest.raises(JobRefused, match="host's: enter the host secret"):  # a participant, jobs not opened
        control.start_training(Caller("p", is_host=False),
                               TrainRequest.from_form(tmp_path / "run", {"data": str(data), "steps": 5}))


def test_every_field_that_sizes_a_run_is_capped_and_one_past_its_cap_is_refused(controls, tmp_path):
    """Every TrainConfig field is either capped in a room or named as sizing nothing; each capped one, one past its
    cap (the tree budget, tree anchors and the checkpoint interval included), is refused in one line naming the
    cap before anything runs. On a10088a only steps and batch were capped (a tree budget of 100,000 passed)."""
    from dataclasses import fields

    assert set(TRAIN_CAPS) | UNSIZED_TRAIN_FIELDS == {f.name for f in fields(TrainConfig)}
    assert not set(TRAIN_CAPS) & UNSIZED_TRAIN_FIELDS
    control = controls(ROOM, secret="s")
    base = {"data": str(_data(tmp_path)), "steps": 100, "checkpoint_every": 50}
    past = {name: getattr(ROOM, cap) + 1 for name, cap in TRAIN_CAPS.items()}
    past["checkpoint_every"] = 1  # with steps one past the checkpoints cap: a checkpoint every step
    past["probe_every"] = 1
    for name, cap in TRAIN_CAPS.items():
        values = {**base, name: past[name]}
        if name == "tree_share":  # a share of the batch: the anchors it gives are capped
            values.update(tree_share=1.0, batch_size=ROOM.train_tree_anchors + 1)
        if name == "checkpoint_every":
            values.update(steps=ROOM.train_checkpoints + 1)
        if name == "probe_every":  # a gradient probe every step, one past the cap; a probe needs trees
            values.update(steps=ROOM.train_checkpoints + 1, probe_every=1, checkpoint_every=1 + ROOM.train_checkpoints,
                          tree_anchors=2)
        request = TrainRequest.from_form(tmp_path / "run", values)
        with pytest.raises(CapExceeded, match=f"over this server's cap of {getattr(ROOM, cap)} \\({cap}\\)$"):
            control.start_training(Caller("p", is_host=True), request)
    assert control.board.jobs() == [] and not (tmp_path / "run").exists()
    within = TrainRequest.from_form(tmp_path / "run", {**base, **recipe(fine_tune=False, short=True)})
    assert control.check(within) is within  # the page's own recipe fits the room


def test_a_busy_folder_is_refused_in_one_line(controls, tmp_path):
    control = controls()
    data = _data(tmp_path)
    run = tmp_path / "run"
    request = TrainRequest.from_form(run, {"data": str(data), "steps": 5})
    job = control.board.start(ME.who, "train", run, SLEEP, run / "train.log", unlocked=False, is_host=True)
    with pytest.raises(FolderBusy, match=f"already training \\(started from this app, process {job.pid}\\)"):
        control.start_training(ME, request)
    with pytest.raises(FolderBusy, match=f"already being built \\(process {job.pid}\\)"):
        control.build_data(ME, run, 1)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / ".lock").write_text(str(__import__("os").getpid()))  # a training started elsewhere holds it
    with pytest.raises(FolderBusy, match="in use by training process"):
        control.start_training(ME, TrainRequest.from_form(locked, {"data": str(data), "steps": 5}))


def test_only_the_starter_or_the_host_stops_a_job_and_an_ended_child_is_reaped(controls, tmp_path):
    control = controls(ROOM, secret="s")
    control.board.open_to_participants = True
    alice, bob = Caller("alice", False), Caller("bob", False)
    job = control.board.start("alice", "data", tmp_path / "set", SLEEP, tmp_path / "log", unlocked=True)
    assert control.may_control(tmp_path / "set", alice) and not control.may_control(tmp_path / "set", bob)
    assert control.may_control(tmp_path / "set", Caller("someone", is_host=True))
    with pytest.raises(JobRefused, match="only whoever started this job, or the host"):
        control.stop(bob, tmp_path / "set")
    assert control.stop(alice, tmp_path / "set") is job
    _wait(lambda: not control.refresh())
    assert job.process.returncode is not None  # waited for: no <defunct> child left behind
    with pytest.raises(JobRefused, match="no job of this server runs on set"):
        control.stop(alice, tmp_path / "set")


def test_a_single_user_job_outlives_its_server_and_is_found_again_with_stop_working(controls, tmp_path):
    """On one's own machine (the single-user profile) a job is not ended with the server: a server started
    afterwards finds it again, shows it as such, and its Stop works; a folder merely looked at gets no registry."""
    first = controls()
    assert not (tmp_path / training.REGISTRY).exists()
    job = first.board.start(HOST, "data", tmp_path / "set", SLEEP, tmp_path / "set" / "log", unlocked=False,
                            is_host=True)
    _wait(lambda: Path(f"/proc/{job.pid}/cmdline").read_bytes().split(b"\0")[0] == sys.executable.encode())
    del first  # the server goes away without ending its jobs (its end hook is a room's only)
    second = controls()
    found = second.job_on(tmp_path / "set")
    assert found is not None and found.running and found.found_again and (found.pid, found.kind) == (job.pid, "data")
    assert second.may_control(tmp_path / "set", Caller("a new browser session", is_host=True))
    second.stop(Caller("a new browser session", is_host=True), tmp_path / "set")
    _wait(lambda: not found.running)
    assert second.refresh() == [] and controls().job_on(tmp_path / "set") is None  # a third start finds nothing


@pytest.mark.slow
def test_a_real_training_run_found_again_after_a_restart_is_stopped_resumable(controls, tmp_path, tiny_model_folder):
    """End to end through the CLI: the service starts `tevcore train` on a tiny model, the server 'restarts'
    (a new board on the same registry), finds the run again, and its Stop leaves the run stopped and resumable."""
    from tiny_models import save_tiny_distillation_set

    from tevcore.target.loading import load_target
    from tevcore.train.runs import run_info

    folder = tiny_model_folder("llama")
    data = save_tiny_distillation_set(load_target(str(folder), device="cpu"), folder, tmp_path / "data")
    run = tmp_path / "run"
    values = {"data": str(data), "target": str(folder), "depth": 3, "context": 4, "steps": 100_000, "batch_size": 4,
              "warmup": 1, "checkpoint_every": 2, "tree_lambda": 0.0, "threads": 1, "layers": 1, "heads": 4,
              "ffn": 64, "draft_vocab": 40}
    request = TrainRequest.from_form(run, values)
    assert training.plan(request)[0], training.plan(request)[1]
    first = controls()
    first.start_training(ME, request)
    _wait(lambda: run_info(run).state == "running" and run_info(run).step >= 3, seconds=120)
    second = controls()  # the restarted server
    found = second.job_on(run)
    assert found is not None and found.found_again and found.kind == "train" and found.running
    second.stop(ME, run)
    _wait(lambda: not found.running, seconds=60)
    info = run_info(run)
    assert info.state == "interrupted" and info.resumable, (info.state, info.error)
