"""The GPU proof's test lane: `python scripts/gpu_cuda_tests.py RESULTS_DIR [--rehearse] [--force]`.

Runs `pytest -m cuda` over the target tests of this checkout (tree forward
vs recompute per family in bf16, T = 0 identity, chi-square of tev and
residual) in a child process and records its JUnit report, one row per test,
as RESULTS_DIR/cuda_tests.json (the proof's record, `tevcore.lab.gpu_proof.schema`)
beside the run's output in cuda_tests.log. It is the harness's part of the
proof, so it lives with the scripts: the package measures, this runs the
checkout's tests. `scripts/gpu_check.sh` calls it before the measuring steps.
Exit codes: 0 the lane passed (or, off CUDA, collected and skipped every
test), 1 a test failed or pytest could not run, 2 bad usage.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))  # the package of this checkout, wherever the script is called from

import torch  # noqa: E402

from tevcore.diskwrite import write_text_atomic  # noqa: E402
from tevcore.lab.gpu_proof.schema import step_path, step_settings, write_step  # noqa: E402
from tevcore.outputs import check_not_replacing, check_output_folder  # noqa: E402
from tevcore.results import RunMeta, command_line  # noqa: E402

CUDA_TESTS = ("tests/target",)


def junit_rows(report: Path) -> list[dict]:
    """One row per test case of a JUnit report: its name, outcome, seconds and (unless it passed) why."""
    cases = list(ElementTree.parse(report).getroot().iter("testcase")) if report.is_file() else []
    rows = []
    for case in cases:
        found = {child.tag: child for child in case}
        outcome = next((tag for tag in ("failure", "error", "skipped") if tag in found), "passed")
        reason = found[outcome].get("message", "") if outcome != "passed" else ""
        rows.append({"test": f"{case.get('classname')}::{case.get('name')}",
                     "outcome": {"failure": "failed"}.get(outcome, outcome), "seconds": float(case.get("time", 0)),
                     "reason": reason[:300]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/gpu_cuda_tests.py", description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the results folder")
    parser.add_argument("--rehearse", action="store_true", help="on the CPU: every CUDA test is collected and skipped")
    parser.add_argument("--force", action="store_true", help="replace a cuda_tests.json already there")
    args = parser.parse_args(argv)
    try:  # a results folder that cannot be one, or an earlier run's result, is refused before pytest runs
        check_output_folder(args.out, "RESULTS_DIR")
        check_not_replacing(step_path(args.out, "cuda_tests"), "RESULTS_DIR: the result", args.force)
    except ValueError as err:
        print(f"gpu_cuda_tests: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cpu" if args.rehearse else "cuda")
    meta = RunMeta.now(command_line("python scripts/gpu_cuda_tests.py", sys.argv[1:] if argv is None else argv),
                       device=str(device), seed=None)
    start = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", *CUDA_TESTS, "-rs", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(prefix="gpu-proof-tests-") as scratch:
        report = Path(scratch) / "cuda_tests.xml"
        done = subprocess.run(command + [f"--junitxml={report}"], cwd=REPOSITORY, capture_output=True, text=True)
        rows = junit_rows(report)
    write_text_atomic(args.out / "cuda_tests.log", done.stdout + done.stderr)
    count = {kind: sum(r["outcome"] == kind for r in rows) for kind in ("passed", "failed", "skipped", "error")}
    summary = {"command": " ".join(["python", *command[1:]]), "exit_code": done.returncode, "collected": len(rows),
               "passed": count["passed"], "failed": count["failed"], "skipped": count["skipped"],
               "errors": count["error"]}
    note = ("the CUDA-marked tests ran on the GPU" if device.type == "cuda" else
            "no CUDA device: pytest collected the CUDA-marked tests and skipped every one (none ran)")
    settings = step_settings("cuda_tests", device, None, args.rehearse, "pytest's own (JUnit report)",
                             time.perf_counter() - start, note)
    write_step(args.out, meta, settings, summary, rows, force=args.force)
    failed = [r for r in rows if r["outcome"] != "passed" and r["outcome"] != "skipped"]
    print(f"== cuda_tests: {note}; {count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped, "
          f"{count['error']} errors (pytest exit {done.returncode})")
    for row in failed[:60]:
        print(f"{row['outcome']}: {row['test']}: {row['reason']}")
    if failed or done.returncode not in (0, 5):
        print(f"gpu_cuda_tests: FAILED: pytest exit {done.returncode}; its output is in {args.out / 'cuda_tests.log'}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
