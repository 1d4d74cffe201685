"""Training faults with real processes: SIGKILL after a checkpoint, SIGKILL inside a checkpoint write, a second run.

The run that is killed is `tevcore train` in a subprocess on a tiny model
folder, paused at a chosen point by a small wrapper that patches one function
of the run folder code before calling the CLI, so the SIGKILL lands exactly
there. The same command then resumes (in-process, through `tevcore.cli.main`,
to spare a second interpreter start) and must end with the weights of the same
command run uninterrupted.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from disk_faults import disk_full_on
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


@pytest.mark.slow
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
    ("tevcore.proposers.block_training", "save_drafter", 2, "after", ""),  # the second checkpoint's folder is half-written
    ("tevcore.train.rundir", "write_json", 2, "before", "latest"),  # renamed into place, `latest` not moved
], ids=["inside-the-folder-write", "before-latest-moves"])
@pytest.mark.slow
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
    if where[1] == "write_json":
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


# ---------------------------------------------------------------- a run that fails before its first step
# In-process on the tiny target: each form of failure must leave no config.json behind (so the corrected command
# is accepted in the same folder), keep the error in status.json, and keep everything of a run with steps done.

def _config(data, **changes):
    from test_loop import tiny_config

    return tiny_config(data, **changes)


def _status(run: Path) -> dict:
    import json

    return json.loads((run / "status.json").read_text())


def _error_line(err: str) -> str:
    """The one line the CLI printed for the failure (progress bars may come before it, nothing after)."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    return lines[0]


def _damaged_copy(data: Path, where: Path) -> Path:
    import shutil

    shutil.copytree(data, where)
    shard = sorted(where.glob("shard_*.safetensors"))[1]
    shard.write_bytes(shard.read_bytes()[:100])
    return where


def _first_step_crashes(monkeypatch):
    import tevcore.train.loop as loop

    def crash(*args, **kwargs):
        raise RuntimeError("the first step blew up")

    monkeypatch.setattr(loop, "optimizer_step", crash)


def _loading_is_interrupted(monkeypatch):
    import tevcore.train.loop as loop

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "AnchorSet", interrupt)


@pytest.mark.parametrize("form", ["init-does-not-fit", "damaged-data", "ctrl-c-while-loading", "first-step-crashes"])
def test_a_run_that_fails_before_its_first_step_takes_back_its_config_and_the_corrected_command_runs(
        form, tiny_target, tiny_data, tmp_path, monkeypatch):
    from tevcore.train.loop import train

    run, data, bad = tmp_path / "run", tiny_data, {}
    if form == "init-does-not-fit":  # a starting drafter of another depth: refused only once it is loaded
        bad = {"init": str(train(_config(tiny_data, steps=1, depth=2), tmp_path / "depth2", tiny_target))}
    elif form == "damaged-data":
        data = _damaged_copy(tiny_data, tmp_path / "data")
    elif form == "ctrl-c-while-loading":
        _loading_is_interrupted(monkeypatch)
    else:
        _first_step_crashes(monkeypatch)
    kind = KeyboardInterrupt if form == "ctrl-c-while-loading" else (ValueError if "data" in form or "init" in form
                                                                     else RuntimeError)
    with pytest.raises(kind):
        train(_config(data, **bad), run, tiny_target)
    assert not (run / "config.json").exists() and not (run / "metrics.jsonl").exists() and not (run / ".lock").exists()
    status = _status(run)
    assert status["step"] == 0
    if kind is KeyboardInterrupt:
        assert status["state"] == "interrupted"
    else:
        assert status["state"] == "crashed" and status["error"]
    monkeypatch.undo()
    final = train(_config(tiny_data, steps=2), run, tiny_target)  # the corrected command, same folder
    assert (final / "model.safetensors").is_file() and _status(run)["state"] == "finished"


def test_a_resumed_run_that_fails_while_loading_keeps_its_config_checkpoint_and_step(
        tiny_target, tiny_data, tmp_path, monkeypatch):
    from tevcore.train.loop import train

    run, config = tmp_path / "run", _config(tiny_data, steps=4)

    def stop_at_2(metrics):
        if metrics["step"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config, run, tiny_target, on_step=stop_at_2)
    saved = (run / "config.json").read_text()
    _loading_is_interrupted(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train(config, run, tiny_target)
    assert (run / "config.json").read_text() == saved and (run / "checkpoint-2").is_dir()
    assert _status(run)["state"] == "interrupted" and _status(run)["step"] == 2
    monkeypatch.undo()
    train(config, run, tiny_target)
    assert _status(run)["step"] == 4


def test_a_fresh_folder_of_a_run_refused_while_loading_is_removed(tiny_target, tiny_data, tmp_path, monkeypatch):
    """Nothing of the failed start survives when it wrote no status yet (a failure in the folder's config check)."""
    import tevcore.train.loop as loop

    def no_room(config, out):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loop, "_prepare_folder", no_room)
    with pytest.raises(OSError):
        loop.train(_config(tiny_data), tmp_path / "new" / "run", tiny_target)
    assert not (tmp_path / "new" / "run").exists()


def test_the_cli_says_one_line_and_the_same_command_runs_once_the_data_is_mended(tiny_run_inputs, tmp_path, capsys):
    import shutil

    folder, data = tiny_run_inputs
    broken = _damaged_copy(data, tmp_path / "data")
    run = tmp_path / "run"
    argv = _argv((folder, broken), run)
    from tevcore.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert _error_line(err).endswith(f"rerun build-data on {broken} to rebuild it") and "damaged" in err and "Traceback" not in err
    assert not (run / "config.json").exists()
    shutil.rmtree(broken)
    shutil.copytree(data, broken)
    assert main(argv) == 0 and (run / "drafter" / "model.safetensors").is_file()


# ---------------------------------------------------------------- a run that cannot learn stops
# A shard changed in place (size intact, NaN inside) is refused by its SHA-256; a non-finite loss (data that
# really holds NaN, its ledger re-recorded) ends the run as failed in one line, its last good checkpoint kept.

def _nan_inside(shard: Path) -> None:
    """Overwrite the stored hidden states of `shard` with fp16 NaN, in place: the file keeps its size."""
    import json
    import struct

    raw = bytearray(shard.read_bytes())
    header_length = struct.unpack("<Q", raw[:8])[0]
    start, end = json.loads(raw[8:8 + header_length])["hidden"]["data_offsets"]
    base = 8 + header_length
    raw[base + start:base + end] = b"\x00\x7e" * ((end - start) // 2)
    shard.write_bytes(bytes(raw))


def _nan_copy(data: Path, where: Path) -> tuple[Path, Path]:
    import shutil

    shutil.copytree(data, where)
    shard = sorted(where.glob("shard_*.safetensors"))[1]
    size = shard.stat().st_size
    _nan_inside(shard)
    assert shard.stat().st_size == size
    return where, shard


def test_a_shard_changed_in_place_is_refused_by_its_checksum_in_one_line(tiny_run_inputs, tmp_path, capsys):
    from tevcore.cli import main

    folder, data = tiny_run_inputs
    broken, shard = _nan_copy(data, tmp_path / "data")
    assert main(_argv((folder, broken), tmp_path / "run")) == 2
    line = _error_line(capsys.readouterr().err)
    assert f"shard {shard} is damaged" in line and "SHA-256" in line
    assert not (tmp_path / "run" / "config.json").exists()


def test_data_holding_nan_ends_the_run_as_failed_in_one_line_naming_the_step_and_the_shard(
        tiny_run_inputs, tmp_path, capsys):
    from tevcore.cli import main
    from tevcore.train import shard_ledger

    folder, data = tiny_run_inputs
    broken, shard = _nan_copy(data, tmp_path / "data")
    shard_ledger.record(broken, shard)  # the ledger agrees: the set was (re)built with NaN in it
    run = tmp_path / "run"
    assert main(_argv((folder, broken), run)) == 2
    line = _error_line(capsys.readouterr().err)
    status = _status(run)
    assert status["state"] == "failed" and status["error"] in line
    assert f"step {status['step'] + 1}: the loss is nan (rows from {shard})" in line
    assert not (run / "drafter").exists()


def test_a_nan_loss_mid_run_keeps_the_last_good_checkpoint(tiny_target, tiny_data, tmp_path, monkeypatch):
    import json

    import tevcore.train.loop as loop
    from tevcore.train.rundir import TrainingFailed, usable_drafters

    real, calls = loop.anchor_loss, []

    def nan_at_step_3(*args, **kwargs):
        calls.append(1)
        loss = real(*args, **kwargs)
        return loss * float("nan") if len(calls) == 3 else loss

    monkeypatch.setattr(loop, "anchor_loss", nan_at_step_3)
    run = tmp_path / "run"
    with pytest.raises(TrainingFailed, match="step 3: the loss is nan"):
        loop.train(_config(tiny_data, steps=6, checkpoint_every=2), run, tiny_target)
    assert _status(run)["state"] == "failed" and _status(run)["step"] == 2
    assert json.loads((run / "latest.json").read_text())["step"] == 2
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    kept = usable_drafters(run)
    assert [p.name for p in kept] == ["checkpoint-2"]
    weights = load_file(str(kept[0] / "model.safetensors"))
    assert all(torch.isfinite(w.float()).all() for w in weights.values())


# ---------------------------------------------------------------- a full disk during training
# The writer fails as a full disk does (`disk_faults.disk_full_on`): the file is created, then writing it raises ENOSPC.

def _no_temporaries(run: Path) -> bool:
    return not [p for p in run.rglob("*") if ".tmp" in p.name or ".partial" in p.name]


@pytest.mark.parametrize("match, times, kept", [
    ("trainer.pt", 2, "checkpoint-2"),  # inside the second checkpoint
    ("model.safetensors", 3, "checkpoint-4"),  # the final drafter folder (after checkpoints 2 and 4)
    ("metrics.jsonl", 3, "checkpoint-2"),  # the third step's metrics line
    ("status.json", 4, "checkpoint-2"),  # a running status (the crash status cannot be written either)
    ("latest.json", 2, "checkpoint-2"),  # the pointer to the second checkpoint
])
def test_a_full_disk_while_training_fails_in_one_line_leaves_no_partial_folder_and_the_same_command_resumes(
        match, times, kept, tiny_target, tiny_data, tmp_path, monkeypatch):
    from tevcore.outputs import WriteFailed
    from tevcore.train.loop import train
    from tevcore.train.rundir import latest_checkpoint

    config = _config(tiny_data, steps=4)
    whole = train(config, tmp_path / "whole", tiny_target)
    run = tmp_path / "run"
    disk_full_on(monkeypatch, match, times)
    with pytest.raises(WriteFailed) as failure:
        train(config, run, tiny_target)
    message = str(failure.value)
    assert "\n" not in message and message.startswith("cannot write ") and match in message
    assert "No space left on device" in message and "free there" in message
    assert ".tmp" not in message and ".partial" not in message  # named by the file, not its temporary name
    assert _no_temporaries(run) and not (run / "drafter").exists() and not (run / ".lock").exists()
    assert latest_checkpoint(run).name == kept
    assert all((p / "trainer.pt").is_file() for p in run.glob("checkpoint-*"))  # no empty checkpoint folder
    monkeypatch.undo()
    final = train(config, run, tiny_target)  # space freed: the same command resumes and ends as one whole run
    assert _same(load_file(str(final / "model.safetensors")), load_file(str(whole / "model.safetensors")))


def test_a_full_disk_in_the_first_step_leaves_a_folder_the_same_command_starts_in(tiny_target, tiny_data, tmp_path,
                                                                                   monkeypatch):
    from tevcore.outputs import WriteFailed
    from tevcore.train.loop import train

    config = _config(tiny_data, steps=2, checkpoint_every=1)
    disk_full_on(monkeypatch, "trainer.pt")
    with pytest.raises(WriteFailed):
        train(config, tmp_path, tiny_target)
    assert not (tmp_path / "config.json").exists() and _status(tmp_path)["state"] == "crashed"
    assert not list(tmp_path.glob("checkpoint-*")) and _no_temporaries(tmp_path)
    monkeypatch.undo()
    assert (train(config, tmp_path, tiny_target) / "model.safetensors").is_file()


def test_a_full_disk_in_the_cli_is_one_line_naming_the_file(tiny_run_inputs, tmp_path, monkeypatch, capsys):
    from tevcore.cli import main

    disk_full_on(monkeypatch, "model.safetensors", 2)
    assert main(_argv(tiny_run_inputs, tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert _error_line(err).startswith("error: cannot write ") and "No space left on device" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", "[" * 100000], ids=["empty", "not-json", "a-list",
                                                                                     "nested"])
def test_a_damaged_run_config_is_named_and_kept(content, tiny_target, tiny_data, tmp_path):
    from tevcore.train.loop import train

    (tmp_path / "config.json").write_text(content)
    with pytest.raises(ValueError, match=f"^{tmp_path / 'config.json'} is .*restore it, or delete it") as refused:
        train(_config(tiny_data, steps=1), tmp_path, tiny_target)
    assert "\n" not in str(refused.value) and (tmp_path / "config.json").read_text() == content


def test_temporaries_of_a_killed_writer_are_cleaned_when_the_folder_is_next_held(tiny_target, tiny_data, tmp_path):
    from tevcore.train.loop import train

    stale = [tmp_path / ".checkpoint-2.tmp", tmp_path / ".checkpoint-4.999999.tmp", tmp_path / ".drafter.999999.tmp"]
    for folder in stale:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"half")
    (tmp_path / ".status.json.999999-0a1b2c3d.partial").write_text("{")
    train(_config(tiny_data, steps=1), tmp_path, tiny_target)
    assert _no_temporaries(tmp_path) and _status(tmp_path)["state"] == "finished"
