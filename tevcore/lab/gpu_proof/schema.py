"""The keys of every GPU-proof step's result, one definition used by the GPU run and the rehearsal.

Each step writes `<step>.json`, a `results.ResultRecord` (command
"gpu-proof"): the shared meta block, the step's settings (its name, the
device's name, dtype, timer, seconds, note), summary and rows. `write_step`
refuses a record whose settings, summary or any row has other keys than
listed here, so a rehearsal that passes proves the GPU run writes the same
files. `cuda_tests` is recorded by the harness (`scripts/gpu_cuda_tests.py`),
the other steps by this package's measuring functions.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from tevcore.engine.records import STAGES
from tevcore.lab.bench_verifiers import MODES
from tevcore.results import ResultRecord, RunMeta, read_result, write_result

COMMAND = "gpu-proof"
MEASURED = ("cost_curve", "verifiers", "round_shares", "identity", "prediction")  # this package's steps
STEPS = ("cuda_tests", *MEASURED)  # in the order scripts/gpu_check.sh runs them
SETTINGS_KEYS = frozenset({"step", "device_name", "dtype", "rehearsal", "timer", "seconds", "note"})

_VERIFIER_ROW = {"geometry", "vocab", "budget", "builder", "trees", "mean_nodes", "mean_depth", "mean_parent_rows",
                 "mean_expected_length", "forward_ms_median", "verifier", "label"} | {
    f"{mode}_{what}" for mode in MODES for what in ("median_ms", "p90_ms", "vs_residual", "fraction_of_forward")}
ROW_KEYS: dict[str, frozenset[str]] = {
    "cuda_tests": frozenset({"test", "outcome", "seconds", "reason"}),
    "cost_curve": frozenset({"geometry", "context", "nodes", "forward_ms", "ratio_to_one_token"}),
    "verifiers": frozenset(_VERIFIER_ROW),
    "round_shares": frozenset({"geometry", "drafter", "budget", "rounds", "round_ms", "mean_emitted",
                               "outside_forwards_share"} | {f"{s}_ms" for s in STAGES} | {f"{s}_share" for s in STAGES}),
    "identity": frozenset({"geometry", "proposer", "verifier", "tokens", "identical", "first_difference",
                           "reference_top2_gap_there", "mean_emitted"}),
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


def step_settings(step: str, device: torch.device, dtype: torch.dtype | None, rehearsal: bool, timer: str,
                  seconds: float, note: str) -> dict:
    """The step's own facts beside the shared meta block: what ran it, how it was timed, how long it took."""
    cuda = device.type == "cuda"
    return {"step": step,
            "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
            "dtype": str(dtype).removeprefix("torch.") if dtype else None, "rehearsal": rehearsal, "timer": timer,
            "seconds": round(seconds, 2), "note": note}


def check_record(record: ResultRecord) -> None:
    """A ValueError naming the first key set that differs from the schema."""
    step = record.settings.get("step")
    if record.command != COMMAND or step not in STEPS:
        raise ValueError(f"not a GPU-proof step: command {record.command!r}, step {step!r}; steps are "
                         f"{', '.join(STEPS)}")
    expected = (("settings", SETTINGS_KEYS, set(record.settings)), ("summary", SUMMARY_KEYS[step], set(record.summary)))
    rows = [("row", ROW_KEYS[step], set(row)) for row in record.rows]
    for what, wanted, found in expected + tuple(rows):
        if found != wanted:
            raise ValueError(f"{step} {what} keys differ from the schema: missing {sorted(wanted - found)}, "
                             f"extra {sorted(found - wanted)}")


def write_step(out_dir: str | Path, meta: RunMeta, settings: dict, summary: dict, rows: list[dict],
               force: bool) -> Path:
    """Check the record against the schema and write it as `<out_dir>/<step>.json` through the one writer."""
    record = ResultRecord(COMMAND, meta, rows, settings=settings, summary=summary)
    check_record(record)
    return write_result(step_path(out_dir, settings["step"]), record, force=force)


def read_step(out_dir: str | Path, step: str) -> ResultRecord:
    """A step's record, checked against the schema."""
    path = step_path(out_dir, step)
    if not path.is_file():
        raise ValueError(f"{path} is missing: run the step {step!r} first")
    record = read_result(path)
    check_record(record)
    return record
