"""The ExitTrain page opens an ablation result and draws each arm's paired gain against the step."""

from __future__ import annotations

import json

from exittrain_ablation import OWN_FILE
from figures.ablation import ARM_COLOURS, ablation_figure
from test_pages import charts, page
from tevcore.results import ResultRecord, RunMeta
from tevcore.studio.training import committed_ablations


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
    at.selectbox(key="et_ablation_pick").set_value(OWN_FILE).run()
    at.text_input(key="et_ablation_path").set_value(str(tmp_path / "missing.json")).run()
    assert not at.exception and any("No ablation result" in i.value for i in at.info)
    at.text_input(key="et_ablation_path").set_value(str(result)).run()
    assert not at.exception and charts(at) >= 1
    shown = at.dataframe[-1].value
    assert sorted(zip(shown["arm"], shown["step"])) == [("hard-0.1", 20), ("hard-0.1", 40), ("soft-0", 20),
                                                        ("soft-0", 40)]
    assert any("The anchor fine-tune alone (soft-0) at step 40" in m.value for m in at.markdown)  # the finding
    at.selectbox(key="et_ablation_against").set_value("twin").run()
    assert list(at.dataframe[-1].value["arm"]) == ["hard-0.1", "hard-0.1"]


def test_every_committed_ablation_is_offered_and_states_its_finding():
    at = page("3_ExitTrain.py").run()
    offered = at.selectbox(key="et_ablation_pick").options
    committed = [str(p) for p in committed_ablations()]
    assert len(committed) >= 2 and offered[:len(committed)] == committed and offered[-1] == OWN_FILE  # then runs'
    for path in committed:
        at.selectbox(key="et_ablation_pick").set_value(path).run()
        assert not at.exception and charts(at) >= 1
        assert any(m.value.startswith("**What it found**") and "s.e." in m.value for m in at.markdown)


def test_an_arm_keeps_its_colour_whichever_arms_a_view_shows():
    """Against the twin only the lambda > 0 arms are drawn: each must keep the colour it has against the start."""
    rows = [_row(arm, 20, "start", 1.0) for arm in ("soft-0", "soft-0.1", "hard-0", "hard-0.1")]
    rows += [_row(arm, 20, "twin", 0.1) for arm in ("soft-0.1", "hard-0.1")]

    def colours(against):
        return {trace.name: trace.line.color for trace in ablation_figure(rows, against, 1.0, 32).data}

    start, twin = colours("start"), colours("twin")
    assert twin == {arm: start[arm] for arm in twin} and len(set(start.values())) == 4
    assert start["soft-0"] == ARM_COLOURS["soft-0"]


def test_a_reference_drafter_is_written_in_the_corner_not_drawn_at_a_step_it_never_trained():
    """The committed drafter beside a naive start gains about ten times the arms: drawn at step 0 it would squash
    their lines, and it was trained in no step of the run."""
    rows = [_row("soft-0", 20, "start", 1.0), _row("soft-0", 40, "start", 2.0), _row("reference", 0, "start", 37.0)]
    fig = ablation_figure(rows, "start", 1.0, 32)
    assert [trace.name for trace in fig.data] == ["soft-0"]
    assert [a.text for a in fig.layout.annotations] == ["reference drafter: +37.0% (s.e. 0.5)"]


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
    at.selectbox(key="et_ablation_pick").set_value(OWN_FILE).run()
    for path, message in ((bench, "is a bench result, not an ablation"), (old, "row 0: no gain_se_pct")):
        at.text_input(key="et_ablation_path").set_value(str(path)).run()
        assert not at.exception and any(message in i.value for i in at.info), [i.value for i in at.info]
