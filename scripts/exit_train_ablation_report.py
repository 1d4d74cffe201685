"""Gather an ExitTrain ablation folder (scripts/exit_train_ablation.sh) into ablation.json and print its table.

Every figure is read from what the runs wrote: each arm's config.json, status.json and metrics.jsonl, and the
`eval-drafter --compare` JSON in eval/ (one pass pairing every checkpoint with the start and with its lambda-0
twin, or an older file per pair). Nothing is recomputed here but percentages of those paired differences, and the
differences between twins of what their gradient probes logged (`train --probe-every`: the batch tree E and the
cosine between the tree term's and the anchor term's gradients at each probed checkpoint). A drafter the pass
scored against the start that is no arm's checkpoint (the committed drafter beside a naive start) is a
"reference" row.

    python scripts/exit_train_ablation_report.py runs/exit-ablation

A folder it cannot read (missing, a file, nothing evaluated yet, an arm's damaged status.json, an eval file that
is not a paired eval-drafter result) ends in one line naming the problem and status 2, and writes nothing.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from tevcore.results import ResultRecord, RunMeta, read_result, write_result
from tevcore.train.ablation_finding import ablation_finding

EVAL_COMMAND = "eval-drafter"
CELL_KEYS = ("temperature", "budget", "prompts", "positions", "baseline", "other", "baseline_length",
             "other_length", "difference", "difference_se")
ARM = re.compile(r"(?:t1-)?(?:soft|hard)-[0-9.]+")  # an arm's folder: [t1-]anchor-lambda (t1-: trained on T = 1)
CHECKPOINT = re.compile(rf"(?:^|/)(?P<arm>{ARM.pattern})/checkpoint-(?P<step>\d+)/?(?:,|$)")  # name, dtype
PROBE = ("probe_tree_E", "probe_grad_cosine", "probe_anchor_grad_norm", "probe_tree_grad_norm")


def compared(cell: dict) -> tuple[str, int, str] | None:
    """(arm, step, "start" or "twin") of a paired cell whose B is an arm's checkpoint; None for any other pair.
    Read from the drafters' own paths, so one pass's many pairs and an older file per pair read alike."""
    other, baseline = CHECKPOINT.search(cell["other"]), CHECKPOINT.search(cell["baseline"])
    if other is None:
        return None
    return other["arm"], int(other["step"]), "start" if baseline is None else "twin"


def _json_file(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} cannot be read: {err}") from None
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"{path} is not valid JSON (cut short or damaged)") from None


def _metrics(path: Path) -> list[dict]:
    """metrics.jsonl's steps (numbers, but a gradient probe's field may be null); a last line still being written
    is left out, a damaged earlier one refused."""
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} cannot be read: {err}") from None
    metrics = []
    for number, line in enumerate(lines, 1):
        try:
            step = json.loads(line)
        except json.JSONDecodeError:
            step = None
        if not isinstance(step, dict) or not all(isinstance(v, (int, float)) or (v is None and k.startswith("probe_"))
                                                 for k, v in step.items()):
            if number == len(lines):
                break  # the line a running arm is writing
            raise ValueError(f"{path}, line {number}: not a metrics line (damaged)")
        metrics.append(step)
    return metrics


def arm_summary(folder: Path) -> dict:
    """An arm's training config, its clock, and the mean of its logged losses over the last tenth of the run
    (none before its first logged step)."""
    config = _json_file(folder / "config.json")
    if not isinstance(config, dict):
        raise ValueError(f"{folder / 'config.json'} is not a run's config (an object of settings)")
    status = _json_file(folder / "status.json")
    clock = ("start_step", "steps_began", "updated")
    if not isinstance(status, dict) or not isinstance(status.get("step"), int) or "state" not in status or any(
            isinstance(status.get(key), bool) or not isinstance(status.get(key, 0), (int, float, type(None)))
            for key in clock):
        raise ValueError(f"{folder / 'status.json'} is not a run's status (a whole step, a state and a clock of "
                         "numbers)")
    metrics = _metrics(folder / "metrics.jsonl")
    tail = metrics[-max(1, len(metrics) // 10):]
    steps = status["step"] - (status.get("start_step") or 0)
    began, updated = status.get("steps_began"), status.get("updated")
    return {"config": config, "state": status["state"], "steps": status["step"],
            "seconds_per_step": (updated - began) / steps if began and updated and steps else None,
            "last_tenth": {k: sum(m[k] for m in tail) / len(tail) for k in tail[0]
                           if k not in ("step", "lr") and not k.startswith("probe_") and all(k in m for m in tail)}
            if tail else {},
            "probes": {m["step"]: {k: m.get(k) for k in PROBE} for m in metrics if "probe_tree_E" in m}}


def _paired_cells(path: Path) -> ResultRecord:
    """The eval-drafter --compare result at `path`, every cell of it holding the paired figures this report
    reads; anything else (another command's result, an older shape, a zero baseline) is one line naming it."""
    record = read_result(path)
    if record.command != EVAL_COMMAND:
        raise ValueError(f"{path} is a {record.command} result, not an eval-drafter --compare one; move it out "
                         f"of {path.parent}")
    for number, cell in enumerate(record.rows):
        missing = [key for key in CELL_KEYS if key not in cell]
        if missing:
            raise ValueError(f"{path}, row {number}: no {', '.join(missing)}: not a paired comparison "
                             "(eval-drafter --compare) of this tevcore")
        wrong = [key for key in CELL_KEYS if key != "budget" and (isinstance(cell[key], bool) or not isinstance(
            cell[key], str if key in ("baseline", "other") else (int, float)))]
        if cell["budget"] != "chain" and (isinstance(cell["budget"], bool) or not isinstance(cell["budget"], int)):
            wrong.append("budget")
        if wrong:
            raise ValueError(f"{path}, row {number}: {', '.join(wrong)} of the wrong type: not a paired comparison "
                             "(eval-drafter --compare) of this tevcore")
        base = cell["baseline_length"]
        if not math.isfinite(base) or base <= 0:
            raise ValueError(f"{path}, row {number}: baseline_length {base!r} is not a measured E (a positive "
                             "number), so no gain can be taken from it")
    return record


def twin_of(arm: str) -> str:
    """The lambda-0 arm trained like `arm` (itself for a lambda-0 arm)."""
    return re.sub(r"-[0-9.]+$", "-0", arm)


def probe_rows(arms: dict) -> list[dict]:
    """Each arm's gradient probe at each probed checkpoint, with the twin difference of the batch tree E (the
    same batch, so the difference is paired) where its lambda-0 twin probed the same step."""
    rows = []
    for name, arm in sorted(arms.items()):
        twin = arms.get(twin_of(name), {}).get("probes", {}) if twin_of(name) != name else {}
        for step, probe in sorted(arm["probes"].items(), key=lambda item: int(item[0])):
            tree_E, twin_E = probe["probe_tree_E"], twin.get(step, {}).get("probe_tree_E")
            rows.append({"arm": name, "step": int(step), "tree_E": tree_E,
                         "tree_E_minus_twin": None if tree_E is None or twin_E is None else tree_E - twin_E,
                         "grad_cosine": probe["probe_grad_cosine"],
                         "anchor_grad_norm": probe["probe_anchor_grad_norm"],
                         "tree_grad_norm": probe["probe_tree_grad_norm"]})
    return rows


def reference_pair(cell: dict, starts: set[str]) -> str | None:
    """The drafter a cell scores against the start when it is no arm's checkpoint (None for any other cell)."""
    def path(spec: str) -> str:
        return spec.rsplit(", ", 1)[0].rstrip("/")

    if path(cell["baseline"]) not in starts or CHECKPOINT.search(cell["other"]) or path(cell["other"]) in starts:
        return None
    return path(cell["other"])


def gather(out: Path, command_line: str) -> ResultRecord:
    """The ablation as the one result record: a row per (arm, checkpoint, baseline, temperature, budget)."""
    found, evals = {}, []
    arms = {p.name: arm_summary(p) for p in sorted(out.iterdir())
            if p.is_dir() and ARM.fullmatch(p.name) and (p / "status.json").is_file()}
    starts = {str(arm["config"].get("init") or "").rstrip("/") for arm in arms.values()} - {""}
    for path in sorted((out / "eval").glob("*.json"), key=lambda p: p.stat().st_mtime):  # a later pass wins
        record = _paired_cells(path)
        evals.append(record)
        for cell in record.rows:
            reference = reference_pair(cell, starts)
            pair = compared(cell) or (None if reference is None else ("reference", 0, "start"))
            if pair is None or cell.get("prompt_set", "all") != "all":
                continue
            arm, step, against = pair
            found[(arm, step, against, cell["temperature"], cell["budget"])] = {
                "arm": arm, "step": step, "against": against, **({"drafter": reference} if reference else {}),
                "temperature": cell["temperature"], "budget": cell["budget"], "prompts": cell["prompts"],
                "positions": cell["positions"], "baseline_length": cell["baseline_length"],
                "other_length": cell["other_length"], "difference": cell["difference"],
                "difference_se": cell["difference_se"],
                "gain_pct": 100 * cell["difference"] / cell["baseline_length"],
                "gain_se_pct": 100 * cell["difference_se"] / cell["baseline_length"]}
    rows = [found[key] for key in sorted(found, key=lambda k: (*k[:4], budget_order(k[4])))]
    first = evals[0] if evals else None
    settings = {"what": "ExitTrain ablation (issue 44): anchor soft|hard x lambda 0|0.1, paired E = 1 + C gains",
                "model": first.settings.get("model") if first else None,
                "eval": {k: first.settings.get(k) for k in ("greedy_sets", "sample_sets", "per_set", "max_new_tokens",
                                                             "verifier")} if first else {},
                "arms": arms, "gradient_probe": probe_rows(arms)}
    meta = RunMeta.now(command_line, first.meta.device if first else "cpu", first.meta.seed if first else None)
    return ResultRecord("exit-train-ablation", meta, rows, settings=settings)


def budget_order(budget: int | str) -> tuple[bool, int]:
    """Node budgets in order, then eval-drafter's 'chain'."""
    return (budget == "chain", 0 if budget == "chain" else budget)


def table(result: ResultRecord) -> str:
    rows = result.rows
    budgets = sorted({r["budget"] for r in rows}, key=budget_order)
    lines = [f"{'arm':<12} {'step':>5} {'vs':<5} {'T':>3} " + " ".join(f"{'B=' + str(b) + ' gain% (s.e.)':>20}"
                                                                     for b in budgets)]
    keys = sorted({(r["arm"], r["step"], r["against"], r["temperature"]) for r in rows})
    for arm, step, against, temperature in keys:
        cells = {r["budget"]: r for r in rows
                 if (r["arm"], r["step"], r["against"], r["temperature"]) == (arm, step, against, temperature)}
        lines.append(f"{arm:<12} {step:>5} {against:<5} {temperature:>3g} " + " ".join(
            f"{cells[b]['gain_pct']:>+12.2f} ({cells[b]['gain_se_pct']:.2f})" if b in cells else f"{'-':>20}"
            for b in budgets))
    return "\n".join(lines)


def probe_table(result: ResultRecord) -> str:
    """The gradient probe at each probed checkpoint (empty when no arm probed)."""
    rows = result.settings.get("gradient_probe") or []
    if not rows:
        return ""
    lines = [f"{'arm':<12} {'step':>5} {'batch tree E':>12} {'minus twin':>11} {'cos(tree, anchor)':>17} "
             f"{'|g anchor|':>10} {'|g tree|':>9}"]

    def shown(value: float | None, spec: str) -> str:  # a probe field may be null (no cosine of a zero gradient)
        return "-" if value is None else format(value, spec)

    for r in rows:
        lines.append(f"{r['arm']:<12} {r['step']:>5} {shown(r['tree_E'], '.4f'):>12} "
                     f"{shown(r['tree_E_minus_twin'], '+.4f'):>11} {shown(r['grad_cosine'], '+.4f'):>17} "
                     f"{shown(r['anchor_grad_norm'], '.4g'):>10} {shown(r['tree_grad_norm'], '.4g'):>9}")
    return "\n".join(lines)


def report(out: Path, argv: list[str]) -> ResultRecord:
    """The ablation of folder `out`, printed and written to out/ablation.json; a ValueError (written: nothing)
    when the folder is missing, a file, or holds no arm and no evaluated checkpoint."""
    if not out.exists():
        raise ValueError(f"{out}: no such folder; give the ablation's folder (bash scripts/exit_train_ablation.sh "
                         "writes it)")
    if not out.is_dir():
        raise ValueError(f"{out} is a file; give the ablation's folder")
    result = gather(out, " ".join(["python", "scripts/exit_train_ablation_report.py", *argv]))
    if not result.rows and not result.settings["arms"]:
        raise ValueError(f"{out} holds no ablation arm and no evaluated checkpoint yet: nothing to report")
    print(table(result))
    for sentence in ablation_finding(result.rows):
        print(sentence)
    if probe_table(result):
        print(f"gradient probe (the batch tree E, its twin difference on the same batch, and the gradients):\n"
              f"{probe_table(result)}")
    for name, arm in result.settings["arms"].items():
        pace = arm["seconds_per_step"]
        print(f"{name}: {arm['state']} at step {arm['steps']}, "
              f"{'-' if pace is None else f'{pace:.2f}'} s/step (this process), last-tenth losses {arm['last_tenth']}")
    write_result(out / "ablation.json", result, force=True)  # a summary of the folder, remade from it each time
    return result


def main(argv: list[str]) -> int:
    try:
        report(Path(argv[0] if argv else "runs/exit-ablation"), argv)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
