"""Training faults with real processes: SIGKILL after a checkpoint, SIGKILL inside a checkpoint write, a second run.

The run that is killed is `tevcore train` in a subprocess on a tiny model
folder, paused at a chosen point by a small wrapper that patches one function
of the run folder code before calling the CLI, so the SIGKILL lands exactly
there. The same command then resumes (in-process, through `tevcore.cli.main`,
to spare a second interpreter start) and must end with the weights of the same
command run uninterrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tevcore.train.data import build_dataset

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--depth", "3", "--context", "4", "--layers", "1", "--heads", "4", "--ffn", "64", "--draft-vocab", "40",
         "--steps", "6", "--batch-size", "8", "--warmup", "2", "--lr", "3e-3", "--tree-lambda", "0.1",
         "--tree-anchors", "2", "--tree-pool", "3", "--checkpoint-every", "2", "--dropout", "0.1", "--threads", "1",
         "--device", "cpu"]

# runs the CLI with `module.name` wrapped: after its `call`-th call whose first argument contains `match`
# (before it, with "before") it touches the marker file and sleeps, so the parent can kill it right there
PAUSING = """
import sys, time, importlib
from pathlib import Path
module_name, name, call, when, match, marker = sys.argv[1:7]
module = importlib.import_module(module_name)
real, calls = getattr(module, name), []
def paused(*args, **kwargs):
    if match not in str(args[0] if args else ""):
        return real(*args, **kwargs)
    calls.append(1)
    if when == "before" and len(calls) == int(call):
        Path(marker).touch(); time.sleep(120)
    result = real(*args, **kwargs)
    if when == "after" and len(calls) == int(call):
        Path(marker).touch(); time.sleep(120)
    return result
setattr(module, name, paused)
from tevcore.cli import main
raise SystemExit(main(sys.argv[7:]))
"""


@pytest.fixture(scope="module")
def tiny_run_inputs(tiny_model_folder, tiny_data_setup, tmp_path_factory):
    """(model folder, data folder): a tiny target on disk and a distillation set it made."""
    from tevcore.target.loading import load_target

    folder = tiny_model_folder("llama")
    config, plan = tiny_data_setup
    data = tmp_path_factory.mktemp("fault-data")
    build_dataset(load_target(str(folder), device="cpu"), config, data, plan=plan)
    return folder, data


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _argv(inputs, run: Path) -> list[str]:
    folder, data = inputs
    return ["train", str(run), "--target", str(folder), "--data", str(data), *FLAGS]


def _train(inputs, run: Path) -> int:
    from tevcore.cli import main

    return main(_argv(inputs, run))


def _start_paused(inputs, run: Path, where: tuple[str, str, int, str, str], marker: Path) -> subprocess.Popen:
    module, name, call, when, match = where
    process = subprocess.Popen([sys.executable, "-c", PAUSING, module, name, str(call), when, match, str(marker),
                                *_argv(inputs, run)], env=_env(), cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not marker.exists():
        if process.poll() is not None:
            raise AssertionError(f"the paused run ended first: {process.stderr.read()[-2000:]}")
        assert time.monotonic() < deadline, "the paused run never reached its pause point"
        time.sleep(0.1)
    return process


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    process.stderr.close()
    assert process.returncode == -signal.SIGKILL


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "drafter" / "model.safetensors"))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def uninterrupted(tiny_run_inputs, tmp_path_factory):
    run = tmp_path_factory.mktemp("whole") / "run"
    assert _train(tiny_run_inputs, run) == 0
    return _weights(run)


def test_sigkill_after_the_first_checkpoint_then_the_same_command_resumes_to_the_same_weights(
        tiny_run_inputs, uninterrupted, tmp_path, capsys):
    run = tmp_path / "run"
    paused = _start_paused(tiny_run_inputs, run, ("tevcore.train.loop", "save_checkpoint", 1, "after", ""),
                           tmp_path / "paused")
    try:
        assert _train(tiny_run_inputs, run) == 2  # a second train on the same folder while the first holds it
        err = capsys.readouterr().err
        assert f"error: {run} is in use by training process {paused.pid}" in err and "Traceback" not in err
    finally:
        _kill(paused)
    assert (run / "checkpoint-2").is_dir() and (run / ".lock").read_text() == str(paused.pid)  # a stale lock
    assert _train(tiny_run_inputs, run) == 0  # the dead owner's lock is taken over
    assert _same(_weights(run), uninterrupted) and not (run / ".lock").exists()


@pytest.mark.parametrize("where", [
    ("tevcore.train.rundir", "save_drafter", 2, "after", ""),  # the second checkpoint's folder is half-written
    ("tevcore.train.rundir", "write_json_atomic", 2, "before", "latest"),  # renamed into place, `latest` not moved
], ids=["inside-the-folder-write", "before-latest-moves"])
def test_sigkill_while_a_checkpoint_is_written_leaves_the_previous_one_loadable(
        tiny_run_inputs, uninterrupted, tmp_path, where):
    from tevcore.target.loading import load_target
    from tevcore.train.rundir import latest_checkpoint, load_checkpoint

    run = tmp_path / "run"
    _kill(_start_paused(tiny_run_inputs, run, where, tmp_path / "paused"))
    checkpoint = latest_checkpoint(run)
    assert checkpoint is not None and checkpoint.name == "checkpoint-2"
    drafter, state = load_checkpoint(checkpoint, load_target(str(tiny_run_inputs[0]), device="cpu"))
    assert state["step"] == 2 and drafter.config.depth == 3
    if where[1] == "write_json_atomic":
        assert (run / "checkpoint-4").is_dir()  # the kill did land between the rename and the pointer
    assert _train(tiny_run_inputs, run) == 0
    assert _same(_weights(run), uninterrupted)


def test_a_stop_signal_ends_the_run_as_stopped_and_the_resume_keeps_its_clock(tiny_run_inputs, uninterrupted, tmp_path):
    """SIGTERM (the app's Stop) is a user's stop, not a crash: status "interrupted" with no error and exit 130;
    the resumed process counts on from the stopped one's active seconds and starts at the checkpoint's step."""
    from tevcore.train.rundir import read_status

    run = tmp_path / "run"
    paused = _start_paused(tiny_run_inputs, run, ("tevcore.train.loop", "save_checkpoint", 1, "after", ""),
                           tmp_path / "paused")
    paused.send_signal(signal.SIGTERM)
    assert paused.wait(timeout=60) == 130
    err = paused.stderr.read()
    paused.stderr.close()
    assert "Traceback" not in err, err[-2000:]
    stopped = read_status(run)
    assert stopped["state"] == "interrupted" and "error" not in stopped and stopped["active_seconds"] > 0
    assert not (run / ".lock").exists()
    assert _train(tiny_run_inputs, run) == 0
    finished = read_status(run)
    assert finished["state"] == "finished" and finished["start_step"] == 2  # resumed at checkpoint-2
    assert finished["active_seconds"] > stopped["active_seconds"]
    assert _same(_weights(run), uninterrupted)
