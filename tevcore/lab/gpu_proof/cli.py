"""`python -m tevcore.lab.gpu_proof STEP --out DIR [--rehearse] [--force]`: one step of the proof, one JSON, a table.

`scripts/gpu_check.sh` runs the test lane (`scripts/gpu_cuda_tests.py`), then
`all`: every measuring step in one process (one start-up), each under its own
time limit. Without --rehearse the steps need a CUDA
device; with it, the same steps run on the CPU at the rehearsal's sizes.
`expected-lengths` measures the E[L] table the prediction step reads (CPU,
the embedded target; run it here, with the real weights).
Exit codes: 0 every step ran and its checks hold; 1 a step failed (failed
tests, a T = 0 difference, an error, its time limit), the others still ran.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch

from tevcore.lab.gpu_proof import predict, rounds_steps, steps
from tevcore.lab.gpu_proof.plans import plan_for
from tevcore.lab.gpu_proof.schema import MEASURED, step_path, step_settings, write_step
from tevcore.outputs import check_not_replacing, check_output_folder
from tevcore.results import Column, RunMeta, command_line, format_table

# Seconds per measuring step on the GPU (the test lane has 120 of its own in scripts/gpu_check.sh).
STEP_LIMITS = {"cost_curve": 90, "verifiers": 60, "round_shares": 60, "identity": 60,
               "prediction": 45}
OLDEST_TRANSFORMERS = "5.24"  # the model call's `cache=` argument (5.17 calls it past_key_values)
REHEARSAL_SLACK = 4  # a shared CPU is slower and its load unknown: there the limits only catch a hang
RUNNERS = {"cost_curve": steps.cost_curve, "verifiers": steps.verifiers,
           "round_shares": rounds_steps.round_shares, "identity": rounds_steps.identity,
           "prediction": predict.prediction}
COLUMNS = {
    "cost_curve": ("geometry", "context", "nodes", "forward_ms", "ratio_to_one_token"),
    "verifiers": ("budget", "verifier", "forward_ms_median", "given_flow_median_ms", "including_flow_median_ms",
                  "including_flow_fraction_of_forward"),
    "round_shares": ("budget", "round_ms", "draft_share", "tree_forward_share", "flow_share", "verify_decision_share",
                     "commit_share", "outside_forwards_share"),
    "identity": ("proposer", "verifier", "tokens", "identical", "first_difference", "mean_emitted"),
    "prediction": ("temperature", "budget", "expected_length", "draft_ms", "tree_forward_ms", "predicted_speedup"),
}


def _cell(key: str):
    """A row's figure, floats to four significant digits, anything else as text cut to 48 characters."""
    def cell(row: dict):
        value = row[key]
        return f"{value:.4g}" if isinstance(value, float) else str(value)[:48]
    return cell


def format_rows(step: str, rows: list[dict], limit: int = 60) -> str:
    return format_table(rows[:limit], [Column(key, _cell(key)) for key in COLUMNS[step]])


def failed(step: str, summary: dict) -> str | None:
    """Why the step's own check failed, or None."""
    if step == "identity" and not summary["all_identical"]:
        return "a T = 0 decode differs from transformers' generate"
    return None


class StepTimeout(Exception):
    """A step ran past its own time limit."""


@contextmanager
def time_limit(seconds: float):
    """Raise `StepTimeout` in this (main) thread after `seconds` of wall time; a child process started with
    subprocess.run is killed on the way out."""
    def expire(signum, frame):
        raise StepTimeout(f"over its limit of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_step(step: str, out_dir: Path, rehearse: bool, force: bool, command: str) -> str | None:
    """Run one step, write its JSON, print its table; None when it passed, else why it failed."""
    device = torch.device("cpu" if rehearse else "cuda")
    plan = plan_for(rehearse)
    meta = RunMeta.now(command, device=str(device), seed=None)  # each step seeds its own generators from the plan
    start = time.perf_counter()
    summary, rows, note = RUNNERS[step](plan, device, out_dir)
    timer = "CUDA events" if device.type == "cuda" else "wall clock (tevcore.timing.seconds_of)"
    dtype = torch.float32 if step == "identity" else getattr(torch, plan.dtype)
    settings = step_settings(step, device, dtype, rehearse, timer, time.perf_counter() - start, note)
    write_step(out_dir, meta, settings, summary, rows, force=force)
    where = "CPU REHEARSAL (tiny geometry; not GPU figures)" if rehearse else settings["device_name"]
    print(f"== {step} on {where} ({settings['seconds']} s): {note}")
    print(format_rows(step, rows), flush=True)
    return failed(step, summary)


def run_steps(names: list[str], out_dir: Path, rehearse: bool, force: bool, command: str) -> int:
    """Each step under its own time limit (`STEP_LIMITS`, times `REHEARSAL_SLACK` in a rehearsal); a step
    that fails or runs out of time is reported and the next one runs. 0 when every step passed."""
    if not rehearse and not torch.cuda.is_available():
        print(f"gpu_proof: the GPU run needs a CUDA device (torch {torch.__version__} sees none); use --rehearse",
              file=sys.stderr)
        return 1
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version(OLDEST_TRANSFORMERS):
        print(f"gpu_proof: transformers {transformers.__version__} is older than {OLDEST_TRANSFORMERS} (tevcore passes "
              "`cache=` to the model); install the carried wheels first (README, 'Your own model / on a GPU')",
              file=sys.stderr)
        return 1
    print(f"gpu_proof: python {sys.version.split()[0]}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, {torch.cuda.get_device_name(0) if not rehearse else 'CPU rehearsal'}")
    if rehearse:
        torch.set_num_threads(1)  # tiny models on a shared CPU: one thread, no pool to wait for
    out_dir.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for step in names:
        limit = STEP_LIMITS[step] * (REHEARSAL_SLACK if rehearse else 1)
        start = time.perf_counter()
        try:
            with time_limit(limit):
                reason = run_step(step, out_dir, rehearse, force, command)
        except StepTimeout as err:
            reason = f"timed out: {err}"
        except Exception as err:  # one broken step must not cost the other steps' figures
            traceback.print_exc()
            reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        outcomes.append((step, reason, time.perf_counter() - start, limit))
        if reason:
            print(f"gpu_proof: {step} FAILED: {reason}", file=sys.stderr, flush=True)
    print()
    print(format_table([{"step": step, "status": (reason or "passed")[:46], "seconds": seconds, "limit": limit}
                        for step, reason, seconds, limit in outcomes],
                       [Column("step", "step"), Column("status", "status"), Column("seconds", "seconds", ".1f"),
                        Column("limit", "limit", ".0f")]))
    return 1 if any(reason for _, reason, _, _ in outcomes) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tevcore.lab.gpu_proof", description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["all", *MEASURED, "expected-lengths"],
                        help="'all' runs every measuring step in order (what scripts/gpu_check.sh does)")
    parser.add_argument("--out", required=True, help="results folder (a JSON file for expected-lengths)")
    parser.add_argument("--rehearse", action="store_true", help="the same steps on the CPU at small geometry")
    parser.add_argument("--prompts", type=int, default=4, help="expected-lengths: held-out MT-Bench prompts")
    parser.add_argument("--rounds", type=int, default=8, help="expected-lengths: decoding rounds per prompt")
    parser.add_argument("--force", action="store_true", help="replace results already there")
    args = parser.parse_args(argv)
    command = command_line("python -m tevcore.lab.gpu_proof", sys.argv[1:] if argv is None else argv)
    names = list(MEASURED) if args.step == "all" else [args.step]
    try:  # a bad results folder is refused in one line before anything is built
        if args.step == "expected-lengths":
            check_not_replacing(args.out, "--out", args.force)
        else:
            check_output_folder(args.out, "--out")
            for step in names:
                check_not_replacing(step_path(args.out, step), "--out: the result", args.force)
    except ValueError as err:
        print(f"gpu_proof: {err}", file=sys.stderr)
        return 2
    if args.step == "expected-lengths":
        record = predict.measure_expected_lengths(Path(args.out), command, args.prompts, args.rounds, force=args.force)
        print(format_table(record.rows, [Column("T", "temperature", "g"), Column("B", "budget", "d"),
                                         Column("E[L]", "expected_length", ".3f")]))
        return 0
    return run_steps(names, Path(args.out), args.rehearse, args.force, command)
