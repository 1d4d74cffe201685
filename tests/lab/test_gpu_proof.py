"""The GPU proof script: its rehearsal writes every step's JSON with the schema's keys; without CUDA it says so,
and a bad results folder or a python without torch is refused in one line.

The GPU run and the rehearsal write through the same `schema.write_step`,
which refuses other keys, so a rehearsal that passes here proves the files
the GPU run writes (their figures need the GPU).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tevcore.lab.gpu_proof.schema import ROW_KEYS, STEPS, SUMMARY_KEYS, check_record, read_step, step_settings
from tevcore.results import ResultRecord, RunMeta
from tevcore.timing import event_seconds_of

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _run(*args: str, timeout: float, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": python}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_cuda_and_without_rehearse_it_says_so_in_one_line_and_exits_0(tmp_path):
    done = _run(str(tmp_path / "out"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and "no CUDA device" in done.stdout
    assert not (tmp_path / "out").exists()


def test_bad_usage_exits_2_with_the_usage_line():
    done = _run("--rehearse", timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("usage: bash scripts/gpu_check.sh")


def _refused_in_one_line(done: subprocess.CompletedProcess, words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_file_as_the_results_folder_is_refused_in_one_line_before_anything_runs(tmp_path):
    results = tmp_path / "results"
    results.write_text("not a folder")
    _refused_in_one_line(_run("--rehearse", str(results), timeout=60), "is a file, not a folder")
    _refused_in_one_line(_run("--rehearse", str(results / "inside"), timeout=60), "is a file, so")
    assert results.read_text() == "not a folder"


def test_a_python_without_torch_is_refused_in_one_line_with_a_failing_exit(tmp_path):
    bare = tmp_path / "python"  # a python that cannot import torch: its own import path holds a broken torch
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "torch.py").write_text("raise ImportError('no torch here')\n")
    bare.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'shadow'} exec {sys.executable} \"$@\"\n")
    bare.chmod(0o755)
    for args in (["--rehearse"], []):
        _refused_in_one_line(_run(*args, str(tmp_path / "out"), timeout=60, python=str(bare)), "cannot import torch")
    assert not (tmp_path / "out").exists()


def test_an_earlier_runs_results_are_kept_without_force(tmp_path):
    (tmp_path / "cost_curve.json").write_text("the first run")
    _refused_in_one_line(_run("--rehearse", str(tmp_path), timeout=60), "pass --force")
    assert (tmp_path / "cost_curve.json").read_text() == "the first run"


def _record(step: str) -> ResultRecord:
    summary = {key: None for key in SUMMARY_KEYS[step]}
    row = {key: 1.0 for key in ROW_KEYS[step]}
    settings = step_settings(step, torch.device("cpu"), None, True, "x", 0.0, "")
    return ResultRecord("gpu-proof", RunMeta.now("python -m tevcore.lab.gpu_proof all", "cpu", None), [row],
                        settings=settings, summary=summary)


@pytest.mark.parametrize("step", STEPS)
def test_the_schema_refuses_a_record_with_a_key_missing_or_extra(step):
    check_record(_record(step))
    missing = _record(step)
    missing.rows[0].pop(sorted(ROW_KEYS[step])[0])
    extra = _record(step)
    extra.summary["surprise"] = 1
    for bad in (missing, extra):
        with pytest.raises(ValueError, match="keys differ from the schema"):
            check_record(bad)


def test_event_timer_is_the_wall_clock_timer_off_cuda():
    result, seconds = event_seconds_of(lambda: sum(range(1000)), "cpu")
    assert result == 499500 and 0 <= seconds < 5


@pytest.mark.slow
def test_rehearsal_writes_every_step_with_the_gpu_runs_keys(tmp_path):
    out = tmp_path / "rehearsal"
    done = _run("--rehearse", str(out), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "CPU REHEARSAL" in done.stdout
    records = {}
    for step in STEPS:
        record = read_step(out, step)  # the one result record, checked against the step's keys
        assert record.settings["rehearsal"] is True and record.rows and record.meta.commit, step
        records[step] = record.to_dict()
    tests = records["cuda_tests"]["summary"]
    if not torch.cuda.is_available():  # the lane ran for real: every CUDA test collected and skipped, none faked
        assert tests["collected"] > 0 and tests["skipped"] == tests["collected"] and tests["passed"] == 0
    curve = records["cost_curve"]["rows"]
    assert {r["geometry"] for r in curve} == set(records["cost_curve"]["summary"]["geometries"])
    assert all(r["ratio_to_one_token"] >= 1.0 for r in curve)
    assert {"tev", "residual", "predraw", "greedy"} <= {r["verifier"] for r in records["verifiers"]["rows"]}
    for row in records["round_shares"]["rows"]:
        shares = [row[f"{s}_share"] for s in ("draft", "tree_build", "tree_forward", "flow", "verify_decision",
                                                 "commit", "record")]
        assert 0.0 < sum(shares) <= 1.0 + 1e-9
    assert records["identity"]["summary"]["all_identical"]
    assert records["prediction"]["summary"]["label"] == "predicted"
