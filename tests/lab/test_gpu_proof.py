"""The GPU proof script: its rehearsal writes every step's JSON with the schema's keys; without CUDA it says so.

The GPU run and the rehearsal write through the same `schema.write_step`,
which refuses other keys, so a rehearsal that passes here proves the files
the GPU run writes (their figures need the GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tevcore.lab.gpu_proof.schema import ROW_KEYS, STEPS, SUMMARY_KEYS, check_record, step_path
from tevcore.timing import event_seconds_of

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
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


def _record(step: str) -> dict:
    summary = {key: None for key in SUMMARY_KEYS[step]}
    row = {key: 1.0 for key in ROW_KEYS[step]}
    meta = json.loads(json.dumps({"commit": "x", "device": "cpu", "device_name": "x", "torch": "x",
                                  "transformers": "x", "python": "x", "dtype": None, "rehearsal": True, "timer": "x",
                                  "time": "x", "seconds": 0.0, "note": ""}))
    return {"step": step, "meta": meta, "summary": summary, "rows": [row]}


@pytest.mark.parametrize("step", STEPS)
def test_the_schema_refuses_a_record_with_a_key_missing_or_extra(step):
    check_record(_record(step))
    missing = _record(step)
    missing["rows"][0].pop(sorted(ROW_KEYS[step])[0])
    extra = _record(step)
    extra["summary"]["surprise"] = 1
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
        records[step] = json.loads(step_path(out, step).read_text())
        check_record(records[step])
        assert records[step]["meta"]["rehearsal"] is True and records[step]["rows"], step
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
