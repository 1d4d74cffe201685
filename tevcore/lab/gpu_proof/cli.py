"""`python -m tevcore.lab.gpu_proof STEP --out DIR [--rehearse]`: one step of the proof, one JSON, a short table.

`scripts/gpu_check.sh` runs each step in its own process under its own time
limit. Without --rehearse a step needs a CUDA device; with it, the same step
runs on the CPU at the rehearsal's sizes. `expected-lengths` measures the E[L]
table the prediction step reads (CPU, the embedded target; run it here).
Exit codes: 0 the step ran and its checks hold; 1 a check failed (failed
tests, a T = 0 difference) or the step could not run (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from tevcore.lab.gpu_proof import predict, rounds_steps, steps
from tevcore.lab.gpu_proof.plans import plan_for
from tevcore.lab.gpu_proof.schema import STEPS, make_meta, write_step

RUNNERS = {"cuda_tests": steps.cuda_tests, "cost_curve": steps.cost_curve, "verifiers": steps.verifiers,
           "round_shares": rounds_steps.round_shares, "identity": rounds_steps.identity,
           "prediction": predict.prediction}
COLUMNS = {
    "cuda_tests": ("test", "outcome", "seconds"),
    "cost_curve": ("geometry", "context", "nodes", "forward_ms", "ratio_to_one_token"),
    "verifiers": ("budget", "verifier", "forward_ms_median", "given_flow_median_ms", "including_flow_median_ms",
                  "including_flow_fraction_of_forward"),
    "round_shares": ("budget", "round_ms", "draft_share", "tree_forward_share", "flow_share", "verify_decision_share",
                     "commit_share", "outside_forwards_share"),
    "identity": ("proposer", "verifier", "tokens", "identical", "first_difference", "mean_block_length"),
    "prediction": ("temperature", "budget", "expected_length", "draft_ms", "tree_forward_ms", "predicted_speedup"),
}


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)[:48]


def format_rows(step: str, rows: list[dict], limit: int = 60) -> str:
    columns = COLUMNS[step]
    shown = rows if step != "cuda_tests" else [r for r in rows if r["outcome"] != "passed"][:limit]
    widths = [max([len(c)] + [len(_cell(r[c])) for r in shown]) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(_cell(r[c]).ljust(w) for c, w in zip(columns, widths)) for r in shown[:limit]]
    return "\n".join(lines)


def failed(step: str, summary: dict) -> str | None:
    """Why the step's own check failed, or None."""
    if step == "cuda_tests" and (summary["failed"] or summary["errors"] or summary["exit_code"] not in (0, 5)):
        return f"pytest exit {summary['exit_code']}: {summary['failed']} failed, {summary['errors']} errors"
    if step == "identity" and not summary["all_identical"]:
        return "a T = 0 decode differs from transformers' generate"
    return None


def run_step(step: str, out_dir: Path, rehearse: bool) -> int:
    if not rehearse and not torch.cuda.is_available():
        print(f"gpu_proof: {step} needs a CUDA device (torch {torch.__version__} sees none); use --rehearse",
              file=sys.stderr)
        return 1
    device = torch.device("cpu" if rehearse else "cuda")
    plan = plan_for(rehearse)
    if rehearse:
        torch.set_num_threads(1)  # tiny models on a shared CPU: one thread, no pool to wait for
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    summary, rows, note = RUNNERS[step](plan, device, out_dir)
    timer = "CUDA events" if device.type == "cuda" else "wall clock (tevcore.timing.seconds_of)"
    dtype = None if step == "cuda_tests" else torch.float32 if step == "identity" else getattr(torch, plan.dtype)
    meta = make_meta(device, dtype, rehearse, timer, time.perf_counter() - start, note)
    path = write_step(out_dir, step, meta, summary, rows)
    where = "CPU REHEARSAL (tiny geometry; not GPU figures)" if rehearse else meta["device_name"]
    print(f"== {step} on {where}: {note}")
    print(format_rows(step, rows))
    print(f"wrote {path} ({meta['seconds']} s)")
    reason = failed(step, summary)
    if reason:
        print(f"gpu_proof: {step} FAILED: {reason}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tevcore.lab.gpu_proof", description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=[*STEPS, "expected-lengths"])
    parser.add_argument("--out", required=True, help="results folder (a JSON file for expected-lengths)")
    parser.add_argument("--rehearse", action="store_true", help="the same step on the CPU at small geometry")
    parser.add_argument("--prompts", type=int, default=4, help="expected-lengths: held-out MT-Bench prompts")
    parser.add_argument("--rounds", type=int, default=8, help="expected-lengths: decoding rounds per prompt")
    args = parser.parse_args(argv)
    try:
        if args.step == "expected-lengths":
            record = predict.measure_expected_lengths(Path(args.out), args.prompts, args.rounds)
            for row in record["rows"]:
                print(f"T={row['temperature']:g} B={row['budget']:>3}  E[L]={row['expected_length']:.3f}")
            return 0
        return run_step(args.step, Path(args.out), args.rehearse)
    except ValueError as err:
        print(f"gpu_proof: {args.step}: {err}", file=sys.stderr)
        return 1
