"""scripts/exit_train_ablation_report.py reads the one-pass eval JSON: each checkpoint's pair with the start and
with its lambda-0 twin, known from the drafters' own paths; any other pair, and per-set rows, are left out."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tevcore.results import ResultRecord, RunMeta, write_result

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "exit_train_ablation_report.py"


def _report():
    spec = importlib.util.spec_from_file_location("exit_train_ablation_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cell(baseline: str, other: str, difference: float, prompt_set: str = "all") -> dict:
    return {"temperature": 1.0, "budget": 8, "prompt_set": prompt_set, "prompts": 3, "positions": 24,
            "baseline": baseline, "other": other, "baseline_length": 2.0, "other_length": 2.0 + difference,
            "difference": difference, "difference_se": 0.01}


def test_one_pass_gives_each_checkpoint_against_the_start_and_its_twin(tmp_path):
    out = tmp_path / "abl"
    (out / "eval").mkdir(parents=True)
    soft0, soft1 = f"{out}/soft-0/checkpoint-20, bfloat16", f"{out}/soft-0.1/checkpoint-20/, bfloat16"  # as named
    start = "assets/drafter, bfloat16"
    cells = [_cell(start, soft0, 0.02), _cell(start, soft1, 0.04), _cell(soft0, soft1, 0.02),
             _cell(soft0, soft1, 0.5, prompt_set="gsm8k"), _cell(soft1, start, -0.04),
             _cell(start, f"{out}/soft-0/checkpoint-20/drafter, bfloat16", 0.1)]
    write_result(out / "eval" / "pass-20.json", ResultRecord("eval-drafter", RunMeta.now("x", "cpu", 0), cells,
                                                            settings={"model": "tiny"}), force=False)
    rows = _report().gather(out, "report").rows
    assert [(r["arm"], r["step"], r["against"]) for r in rows] == [("soft-0", 20, "start"), ("soft-0.1", 20, "start"),
                                                                   ("soft-0.1", 20, "twin")]
    assert [r["gain_pct"] for r in rows] == [1.0, 2.0, 1.0]
    assert json.loads(json.dumps(rows))[2]["difference_se"] == 0.01


def _arm(out: Path, name: str, init: str, probes: dict[int, tuple[float, float]]) -> None:
    """An arm folder as `train` leaves it: probed lines carry the probe's fields, the others do not."""
    folder = out / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"init": init}))
    (folder / "status.json").write_text(json.dumps({"state": "finished", "step": 4, "start_step": 0, "updated": 9.0,
                                                    "steps_began": 1.0}))
    lines = [{"step": s, "lr": 1e-4, "distill": 1.0, "loss": 1.0,
              **({"probe_tree_E": probes[s][0], "probe_grad_cosine": probes[s][1], "probe_anchor_grad_norm": 2.0,
                  "probe_tree_grad_norm": 0.5} if s in probes else {})} for s in range(1, 5)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_t1_arms_a_reference_and_the_gradient_probe_with_its_twin_differences(tmp_path):
    out = tmp_path / "abl"
    (out / "eval").mkdir(parents=True)
    start = f"{out}/naive-start/run/drafter"
    _arm(out, "soft-0", start, {2: (1.50, 0.10), 4: (1.60, 0.20)})
    _arm(out, "soft-0.1", start, {2: (1.55, 0.30), 4: (1.70, -0.10)})
    _arm(out, "t1-soft-0", start, {4: (1.40, 0.05)})
    _arm(out, "t1-soft-0.1", start, {2: (1.45, 0.50), 4: (1.48, 0.40)})
    t1_0, t1_1 = f"{out}/t1-soft-0/checkpoint-4, bfloat16", f"{out}/t1-soft-0.1/checkpoint-4, bfloat16"
    cells = [_cell(f"{start}, bfloat16", "assets/drafter, bfloat16", 0.2), _cell(f"{start}, bfloat16", t1_0, 0.04),
             _cell(t1_0, t1_1, 0.02), _cell("assets/drafter, bfloat16", "other/drafter, bfloat16", 0.3)]
    write_result(out / "eval" / "pass-4.json", ResultRecord("eval-drafter", RunMeta.now("x", "cpu", 0), cells,
                                                           settings={"model": "tiny"}), force=False)
    result = _report().gather(out, "report")
    assert [(r["arm"], r["step"], r["against"]) for r in result.rows] == [
        ("reference", 0, "start"), ("t1-soft-0", 4, "start"), ("t1-soft-0.1", 4, "twin")]
    assert result.rows[0]["drafter"] == "assets/drafter" and result.rows[0]["gain_pct"] == 10.0
    probes = {(r["arm"], r["step"]): r for r in result.settings["gradient_probe"]}
    assert probes[("soft-0.1", 4)]["tree_E_minus_twin"] == pytest.approx(0.10)
    assert probes[("soft-0.1", 2)]["tree_E_minus_twin"] == pytest.approx(0.05)
    assert probes[("t1-soft-0.1", 2)]["tree_E_minus_twin"] is None  # its twin did not probe step 2
    assert probes[("t1-soft-0.1", 4)]["tree_E_minus_twin"] == pytest.approx(0.08)
    assert probes[("soft-0", 4)]["tree_E_minus_twin"] is None and probes[("soft-0", 4)]["grad_cosine"] == 0.20
    assert result.settings["arms"]["soft-0"]["last_tenth"] == {"distill": 1.0, "loss": 1.0}  # probe fields left out
    assert "+0.1000" in _report().probe_table(result)
