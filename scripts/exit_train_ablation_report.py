"""Gather an ExitTrain ablation folder (scripts/exit_train_ablation.sh) into ablation.json and print its table.

Every figure is read from what the runs wrote: each arm's config.json, status.json and metrics.jsonl, and the
`eval-drafter --compare` JSON of every checkpoint against the start and against its lambda-0 twin. Nothing is
recomputed here but percentages of those paired differences.

    python scripts/exit_train_ablation_report.py runs/exit-ablation
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

EVAL_NAME = re.compile(r"^(?P<arm>(soft|hard)-[0-9.]+)-(?P<step>\d+)-vs-(?P<against>start|twin)\.json$")


def arm_summary(folder: Path) -> dict:
    """An arm's training config, its clock, and the mean of its logged losses over the last tenth of the run."""
    config = json.loads((folder / "config.json").read_text())
    status = json.loads((folder / "status.json").read_text())
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line]
    tail = metrics[-max(1, len(metrics) // 10):]
    steps = status["step"] - status.get("start_step", 0)
    began = status.get("steps_began")
    return {"config": config, "state": status["state"], "steps": status["step"],
            "seconds_per_step": (status["updated"] - began) / steps if began and steps else None,
            "last_tenth": {k: sum(m[k] for m in tail) / len(tail) for k in tail[0] if k not in ("step", "lr")}}


def gather(out: Path) -> dict:
    rows = []
    for path in sorted((out / "eval").glob("*.json")):
        match = EVAL_NAME.match(path.name)
        if match is None:
            continue
        record = json.loads(path.read_text())
        for cell in record["cells"]:
            rows.append({"arm": match["arm"], "step": int(match["step"]), "against": match["against"],
                         "temperature": cell["temperature"], "budget": cell["budget"], "prompts": cell["prompts"],
                         "positions": cell["positions"], "baseline_length": cell["baseline_length"],
                         "other_length": cell["other_length"], "difference": cell["difference"],
                         "difference_se": cell["difference_se"],
                         "gain_pct": 100 * cell["difference"] / cell["baseline_length"],
                         "gain_se_pct": 100 * cell["difference_se"] / cell["baseline_length"]})
    arms = {p.name: arm_summary(p) for p in sorted(out.iterdir())
            if p.is_dir() and re.fullmatch(r"(soft|hard)-[0-9.]+", p.name) and (p / "status.json").is_file()}
    first = next(iter(json.loads(p.read_text()) for p in sorted((out / "eval").glob("*.json"))), {})
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"what": "ExitTrain ablation (issue 44): anchor soft|hard x lambda 0|0.1, paired E = 1 + C gains",
            "commit": commit, "target": first.get("target"), "eval": {k: first.get(k) for k in (
                "greedy_sets", "sample_sets", "per_set", "max_new_tokens", "seed", "verifier", "device", "threads")},
            "arms": arms, "rows": rows}


def table(result: dict) -> str:
    rows = result["rows"]
    budgets = sorted({r["budget"] for r in rows})
    lines = [f"{'arm':<9} {'step':>5} {'vs':<5} {'T':>3} " + " ".join(f"{'B=' + str(b) + ' gain% (s.e.)':>20}"
                                                                     for b in budgets)]
    keys = sorted({(r["arm"], r["step"], r["against"], r["temperature"]) for r in rows})
    for arm, step, against, temperature in keys:
        cells = {r["budget"]: r for r in rows
                 if (r["arm"], r["step"], r["against"], r["temperature"]) == (arm, step, against, temperature)}
        lines.append(f"{arm:<9} {step:>5} {against:<5} {temperature:>3g} " + " ".join(
            f"{cells[b]['gain_pct']:>+12.2f} ({cells[b]['gain_se_pct']:.2f})" if b in cells else f"{'-':>20}"
            for b in budgets))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "runs/exit-ablation")
    result = gather(out)
    (out / "ablation.json").write_text(json.dumps(result, indent=2))
    print(table(result))
    for name, arm in result["arms"].items():
        pace = arm["seconds_per_step"]
        print(f"{name}: {arm['state']} at step {arm['steps']}, "
              f"{'-' if pace is None else f'{pace:.2f}'} s/step (this process), last-tenth losses {arm['last_tenth']}")
    print(f"wrote {out / 'ablation.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
