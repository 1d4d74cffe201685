"""The ExitTrain page opens an ablation result and draws each arm's paired gain against the step."""

from __future__ import annotations

import json

from test_pages import charts, page
from tevcore.results import ResultRecord, RunMeta


def _row(arm: str, step: int, against: str, gain: float) -> dict:
    return {"arm": arm, "step": step, "against": against, "temperature": 1.0, "budget": 32, "prompts": 3,
            "positions": 24, "baseline_length": 2.0, "other_length": 2.0 * (1 + gain / 100), "difference": gain / 50,
            "difference_se": 0.01, "gain_pct": gain, "gain_se_pct": 0.5}


def test_an_ablation_result_is_opened_and_drawn(tmp_path):
    rows = [_row(arm, step, "start", 0.1 * step) for arm in ("soft-0", "hard-0.1") for step in (20, 40)]
    rows += [_row("hard-0.1", step, "twin", 0.05) for step in (20, 40)]
    result = tmp_path / "ablation.json"
    record = ResultRecord("exit-train-ablation", RunMeta.now("scripts/exit_train_ablation_report.py", "cpu", 0), rows,
                          settings={"arms": {}})
    result.write_text(json.dumps(record.to_dict()))
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_ablation_path").set_value(str(tmp_path / "missing.json")).run()
    assert not at.exception and any("No ablation result" in i.value for i in at.info)
    at.text_input(key="et_ablation_path").set_value(str(result)).run()
    assert not at.exception and charts(at) >= 1
    shown = at.dataframe[-1].value
    assert sorted(zip(shown["arm"], shown["step"])) == [("hard-0.1", 20), ("hard-0.1", 40), ("soft-0", 20),
                                                        ("soft-0", 40)]
    at.selectbox(key="et_ablation_against").set_value("twin").run()
    assert list(at.dataframe[-1].value["arm"]) == ["hard-0.1", "hard-0.1"]


def test_another_commands_result_or_an_old_row_is_one_line_not_a_traceback(tmp_path):
    """Issue 51: a bench result (or an ablation row without its figures) given to the tab raised a KeyError."""
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(ResultRecord("bench", RunMeta.now("x", "cpu", 0),
                                             [{"dataset": "mt-bench", "mean_emitted": 2.0}]).to_dict()))
    old = tmp_path / "old.json"
    row = _row("soft-0", 20, "start", 1.0)
    del row["gain_se_pct"]
    old.write_text(json.dumps(ResultRecord("exit-train-ablation", RunMeta.now("x", "cpu", 0), [row]).to_dict()))
    at = page("3_ExitTrain.py").run()
    for path, message in ((bench, "is a bench result, not an ablation"), (old, "row 0: no gain_se_pct")):
        at.text_input(key="et_ablation_path").set_value(str(path)).run()
        assert not at.exception and any(message in i.value for i in at.info), [i.value for i in at.info]
