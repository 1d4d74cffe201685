"""The JSON every step of the GPU proof writes: one definition of its keys, used by the GPU run and the rehearsal.

Each step writes `<step>.json` = {"step", "meta", "summary", "rows"}; `write_step`
refuses a record whose meta, summary or any row has other keys than listed
here, so a rehearsal that passes proves the GPU run writes the same files.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

from tevcore.engine.records import STAGES
from tevcore.lab.bench import git_commit
from tevcore.lab.bench_verifiers import MODES

STEPS = ("cuda_tests", "cost_curve", "verifiers", "round_shares", "identity", "prediction")
TOP_KEYS = frozenset({"step", "meta", "summary", "rows"})
META_KEYS = frozenset({"commit", "device", "device_name", "torch", "transformers", "python", "dtype", "rehearsal",
                       "timer", "time", "seconds", "note"})

_VERIFIER_ROW = {"geometry", "vocab", "budget", "builder", "trees", "mean_nodes", "mean_depth", "mean_parent_rows",
                 "mean_expected_length", "forward_ms_median", "verifier", "label"} | {
    f"{mode}_{what}" for mode in MODES for what in ("median_ms", "p90_ms", "vs_residual", "fraction_of_forward")}
ROW_KEYS: dict[str, frozenset[str]] = {
    "cuda_tests": frozenset({"test", "outcome", "seconds", "reason"}),
    "cost_curve": frozenset({"geometry", "context", "nodes", "forward_ms", "ratio_to_one_token"}),
    "verifiers": frozenset(_VERIFIER_ROW),
    "round_shares": frozenset({"geometry", "drafter", "budget", "rounds", "round_ms", "mean_block_length",
                               "outside_forwards_share"} | {f"{s}_ms" for s in STAGES} | {f"{s}_share" for s in STAGES}),
    "identity": frozenset({"geometry", "proposer", "verifier", "tokens", "identical", "first_difference",
                           "reference_top2_gap_there", "mean_block_length"}),
    "prediction": frozenset({"temperature", "budget", "expected_length", "tree_forward_ms", "draft_ms",
                             "one_token_ms", "predicted_speedup"}),
}
SUMMARY_KEYS: dict[str, frozenset[str]] = {
    "cuda_tests": frozenset({"command", "exit_code", "collected", "passed", "failed", "skipped", "errors"}),
    "cost_curve": frozenset({"geometries", "contexts", "nodes", "repeats"}),
    "verifiers": frozenset({"geometry", "temperature", "rounds", "rules", "goals"}),
    "round_shares": frozenset({"geometry", "drafter", "goal_outside_forwards_share", "goal_met"}),
    "identity": frozenset({"geometry", "dtype", "new_tokens", "reference", "all_identical"}),
    "prediction": frozenset({"label", "geometry", "context", "formula", "expected_lengths_from"}),
}


def step_path(out_dir: str | Path, step: str) -> Path:
    return Path(out_dir) / f"{step}.json"


def make_meta(device: torch.device, dtype: torch.dtype | None, rehearsal: bool, timer: str, seconds: float,
              note: str) -> dict:
    """The run's facts every step records beside its figures."""
    import transformers

    cuda = device.type == "cuda"
    return {"commit": git_commit(), "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "dtype": str(dtype).removeprefix("torch.") if dtype else None,
            "rehearsal": rehearsal, "timer": timer, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(seconds, 2), "note": note}


def check_record(record: dict) -> None:
    """A ValueError naming the first key set that differs from the schema."""
    step = record.get("step")
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
    expected = (("record", TOP_KEYS, set(record)), ("meta", META_KEYS, set(record["meta"])),
                ("summary", SUMMARY_KEYS[step], set(record["summary"])))
    rows = [("row", ROW_KEYS[step], set(row)) for row in record["rows"]]
    for what, wanted, found in expected + tuple(rows):
        if found != wanted:
            raise ValueError(f"{step} {what} keys differ from the schema: missing {sorted(wanted - found)}, "
                             f"extra {sorted(found - wanted)}")


def write_step(out_dir: str | Path, step: str, meta: dict, summary: dict, rows: list[dict]) -> Path:
    """Check the record against the schema and write it as `<out_dir>/<step>.json`."""
    record = {"step": step, "meta": meta, "summary": summary, "rows": rows}
    check_record(record)
    path = step_path(out_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def read_step(out_dir: str | Path, step: str) -> dict:
    """A step's record, checked against the schema."""
    path = step_path(out_dir, step)
    if not path.is_file():
        raise ValueError(f"{path} is missing: run the step {step!r} first")
    record = json.loads(path.read_text())
    check_record(record)
    return record
