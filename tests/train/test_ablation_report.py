"""scripts/exit_train_ablation_report.py reads the one-pass eval JSON: each checkpoint's pair with the start and
with its lambda-0 twin, known from the drafters' own paths; any other pair, and per-set rows, are left out."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
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


# ---------------------------------------------------------------- issue 51: a folder it cannot read is one line

def _arm(out: Path, name: str = "soft-0", status: str | None = None, metrics: str | None = None) -> Path:
    arm = out / name
    arm.mkdir(parents=True)
    (arm / "config.json").write_text(json.dumps({"steps": 20}))
    (arm / "status.json").write_text(status if status is not None else json.dumps(
        {"state": "finished", "step": 20, "start_step": 0, "steps_began": 1.0, "updated": 11.0}))
    (arm / "metrics.jsonl").write_text(metrics if metrics is not None else "".join(
        json.dumps({"step": s, "loss": 1.0 / s, "lr": 1e-4}) + "\n" for s in range(1, 21)))
    return arm


def _eval(out: Path, rows: list[dict], command: str = "eval-drafter", name: str = "pass.json") -> Path:
    (out / "eval").mkdir(parents=True, exist_ok=True)
    return write_result(out / "eval" / name, ResultRecord(command, RunMeta.now("x", "cpu", 0), rows,
                                                          settings={"model": "tiny"}), force=True)


def _good_cells(out: Path) -> list[dict]:
    return [_cell("assets/drafter, bfloat16", f"{out}/soft-0/checkpoint-20, bfloat16", 0.02)]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _old_shape(out: Path) -> None:  # an eval-drafter result of before the paired cells: E per drafter only
    _eval(out, [{"temperature": 1.0, "budget": 8, "prompts": 3, "block_length": 2.1}])


BROKEN_FOLDERS = [
    ("missing", lambda out: None, "no such folder"),
    ("a-file", lambda out: out.parent.mkdir(parents=True, exist_ok=True) or out.write_text("x"), "is a file"),
    ("empty", lambda out: out.mkdir(parents=True), "holds no ablation arm and no evaluated checkpoint"),
    ("empty-status", lambda out: _arm(out, status=""), "status.json is not valid JSON"),
    ("cut-status", lambda out: _cut(_arm(out) / "status.json"), "status.json is not valid JSON"),
    ("status-not-a-run", lambda out: _arm(out, status="[1, 2]"), "status.json is not a run's status"),
    ("status-clock-text", lambda out: _arm(out, status=json.dumps({"state": "running", "step": 3, "updated": "now",
                                                                   "steps_began": 1.0})),
     "status.json is not a run's status"),
    ("config-not-a-run", lambda out: (_arm(out) / "config.json").write_text("[]"), "config.json is not a run's config"),
    ("null-loss", lambda out: _arm(out, metrics='{"step": 1, "loss": 1}\n{"step": 2, "loss": null}\n{"step": 3}\n'),
     "metrics.jsonl, line 2: not a metrics line"),
    ("damaged-metrics", lambda out: _arm(out, metrics='{"step": 1, "loss": 1}\n{"st\n{"step": 3, "loss": 1}\n'),
     "metrics.jsonl, line 2: not a metrics line"),
    ("cut-eval", lambda out: _cut(_eval(out, _good_cells(out))), "is not a JSON file"),
    ("old-shape-eval", _old_shape, "row 0: no positions, baseline, other, baseline_length"),
    ("another-command", lambda out: _eval(out, [{"dataset": "mt-bench", "mean_emitted": 2.0}], command="bench"),
     "is a bench result, not an eval-drafter --compare one"),
    ("zero-baseline", lambda out: _eval(out, [dict(_good_cells(out)[0], baseline_length=0.0)]),
     "baseline_length 0.0 is not a measured E"),
    ("text-difference", lambda out: _eval(out, [dict(_good_cells(out)[0], difference="0.02")]),
     "difference of the wrong type"),
]


@pytest.mark.parametrize("make, message", [case[1:] for case in BROKEN_FOLDERS], ids=[c[0] for c in BROKEN_FOLDERS])
def test_a_folder_the_report_cannot_read_is_one_line_and_status_2(tmp_path, capsys, make, message):
    out = tmp_path / "abl"
    make(out)
    before = _snapshot(tmp_path)
    capsys.readouterr()  # what making the folder printed
    code = _report().main([str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert _snapshot(tmp_path) == before  # no ablation.json, nothing touched


@pytest.mark.parametrize("metrics", ["", '{"step": 1, "loss": 1.0}\n{"step": 2, "lo'],
                         ids=["empty-metrics", "last-line-being-written"])
def test_an_arm_that_has_logged_nothing_yet_or_is_writing_a_line_is_reported(tmp_path, capsys, metrics):
    out = tmp_path / "abl"
    _arm(out, metrics=metrics)
    _eval(out, _good_cells(out))
    assert _report().main([str(out)]) == 0
    arm = json.loads((out / "ablation.json").read_text())["settings"]["arms"]["soft-0"]
    assert arm["last_tenth"] == ({} if not metrics else {"loss": 1.0})


def test_the_script_itself_ends_an_empty_folder_in_one_line(tmp_path):
    (tmp_path / "abl").mkdir()
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "abl")], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(SCRIPT.parents[1])))
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.strip().startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert list((tmp_path / "abl").iterdir()) == []
def _probed_arm(out: Path, name: str, init: str, probes: dict[int, tuple[float, float | None]]) -> None:
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
    _probed_arm(out, "soft-0", start, {2: (1.50, 0.10), 4: (1.60, 0.20)})
    _probed_arm(out, "soft-0.1", start, {2: (1.55, 0.30), 4: (1.70, -0.10)})
    _probed_arm(out, "t1-soft-0", start, {4: (1.40, 0.05)})
    _probed_arm(out, "t1-soft-0.1", start, {2: (1.45, 0.50), 4: (1.48, 0.40)})
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


def test_a_probe_with_no_cosine_is_read_as_a_probe_not_refused_as_damage(tmp_path, capsys):
    """A zero gradient leaves the cosine null (None): that line is a probe, and the report still runs."""
    out = tmp_path / "abl"
    _probed_arm(out, "t1-hard-0", "start/drafter", {2: (1.30, None), 4: (1.35, 0.25)})
    _probed_arm(out, "t1-hard-0.1", "start/drafter", {2: (None, None)})  # a probe that measured no tree E
    (out / "t1-hard-0" / "metrics.jsonl").write_text((out / "t1-hard-0" / "metrics.jsonl").read_text().replace(
        '"probe_grad_cosine": 0.25', '"probe_grad_cosine": null'))  # the last line has no cosine either
    assert _report().main([str(out)]) == 0
    probes = json.loads((out / "ablation.json").read_text())["settings"]["gradient_probe"]
    assert [(r["arm"], r["step"], r["grad_cosine"], r["tree_E_minus_twin"]) for r in probes] == [
        ("t1-hard-0", 2, None, None), ("t1-hard-0", 4, None, None), ("t1-hard-0.1", 2, None, None)]
    shown = capsys.readouterr().out
    assert "t1-hard-0 " in shown and "t1-hard-0.1 " in shown
