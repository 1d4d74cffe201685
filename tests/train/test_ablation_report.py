"""scripts/exit_train_ablation_report.py reads the one-pass eval JSON: each checkpoint's pair with the start and
with its lambda-0 twin, known from the drafters' own paths; any other pair, and per-set rows, are left out."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

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
