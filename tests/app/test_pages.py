"""Smoke tests of every page with streamlit's AppTest: it runs, raises nothing, shows its widgets and figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import appdata
from exittrain_ablation import OWN_FILE
from explorer_kit import explorer_of, put_explorer
from page_state_kit import put_workshop
from tevcore.studio import workshop_tables
from workshop_state import WorkshopSession

APP = Path(__file__).resolve().parents[2] / "app"
PAGES = APP / "pages"


def page(name: str, timeout: float = 120) -> AppTest:
    return AppTest.from_file(str(PAGES / name if name != "Home.py" else APP / name), default_timeout=timeout)


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def test_home_links_every_page():
    at = page("Home.py").run()
    assert not at.exception
    assert len(at.get("page_link")) == 5


def test_explorer_replays_records_without_a_model():
    at = page("1_Tree_explorer.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=3, budget=12), done=True, source="test records")
    at.run()
    assert not at.exception and not at.error
    assert charts(at) >= 6  # tree, p(.|v), timings, block length, exit depth, speed
    assert at.slider(key="ex_round").value == 2
    at.selectbox(key="ex_node_2").set_value(0).run()
    assert not at.exception
    at.slider(key="ex_round").set_value(0).run()
    assert not at.exception and not at.error
    assert len(at.get("download_button")) == 1


def test_explorer_keeps_each_rounds_node_and_survives_a_round_switch():
    records = appdata.synthetic_records(rounds=3, budget=12)
    records[0] = appdata.synthetic_record(budget=3, index=0)[0]  # round 0 has fewer nodes than round 2
    at = page("1_Tree_explorer.py")
    session = put_explorer(at, records=records, done=True)
    at.run()
    last = records[2].tree.num_nodes - 1
    at.selectbox(key="ex_node_2").set_value(last).run()
    at.slider(key="ex_round").set_value(0).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="ex_node_0").value == (records[0].exit_node or 0)  # node `last` is not in round 0
    at.slider(key="ex_round").set_value(2).run()
    assert at.selectbox(key="ex_node_2").value == last  # remembered per round, as an int
    session.view.nodes = {2: "7: ' the' (depth 2)"}  # a stale label read back as text
    at.run()
    assert not at.exception and at.selectbox(key="ex_node_2").value == (records[2].exit_node or 0)


def test_explorer_recovers_from_a_view_error_and_keeps_the_rounds(monkeypatch):
    import figures

    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed")

    at = page("1_Tree_explorer.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=3, budget=12), done=True)
    at.run()
    with monkeypatch.context() as patch:
        patch.setattr(figures, "record_tree_figure", broken)
        at.slider(key="ex_round").set_value(1).run()
    assert not at.exception
    assert any("drawing failed" in e.value and "Every round is kept (3 rounds)" in e.value for e in at.error)
    assert len(explorer_of(at).records) == 3
    at.run()
    assert not at.exception and not at.error and charts(at) >= 6


def test_explorer_reports_an_empty_prompt():
    at = page("1_Tree_explorer.py").run()
    at.sidebar.text_area[0].set_value("   ")
    at.button(key="ex_step").click().run()
    assert not at.exception
    assert any("prompt is empty" in e.value for e in at.error)


@pytest.mark.slow
def test_explorer_runs_one_live_round_on_the_real_target(monkeypatch):
    monkeypatch.setenv("TEV_APP_PROPOSER", "rollout")
    at = page("1_Tree_explorer.py", timeout=240).run()
    at.sidebar.number_input(key="ex_budget").set_value(6)
    at.sidebar.number_input(key="ex_max_new").set_value(3)
    at.sidebar.selectbox(key="ex_proposer").set_value("rollout")
    at.sidebar.selectbox(key="ex_trim").set_value("auto")  # measures (or reads) this machine's cost curve
    at.button(key="ex_step").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    records = explorer_of(at).records
    assert len(records) == 1 and records[0].emitted >= 1
    assert records[0].budget == 6 and records[0].tree.size <= 6
    assert charts(at) >= 6
    assert any("1 + C" in m.label for m in at.metric)


def chart_specs(at: AppTest) -> list[dict]:
    """The plotly figures a page drew, as their JSON (data and layout)."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def titled(specs: list[dict], start: str) -> list[dict]:
    return [s for s in specs if str(s["layout"].get("title", {}).get("text", "")).startswith(start)]


def test_verifier_comparison_on_the_example_tree():
    at = page("2_Verifier_comparison.py").run()
    assert not at.exception and not at.error
    at.number_input(key="vc_n").set_value(20_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error
    summary = at.dataframe[0].value
    assert len(summary) == 6
    column = next(c for c in summary.columns if c.startswith("at T = "))
    assert column != "at T = 0"  # the example tree opens at a sampling temperature
    exact = summary[summary[column].str.startswith("exact")]
    assert len(exact) == 5  # tev, predraw, residual, greedy and chain, each against its own law
    assert (exact["exit χ² p (vs its law)"] > 1e-4).all()
    assert (exact["bonus χ² p (all exits, vs its law)"] > 1e-4).all()
    standing = dict(zip(summary["verifier"], summary[column]))
    assert standing["greedy"].startswith("exact only for the T = 0 target")  # not among the optimal ones
    assert standing["chain"] == "exact, with its own law"
    assert all(standing[n].startswith("exact, optimal") for n in ("tev", "predraw", "residual"))
    naive = summary[summary["verifier"].str.startswith("naive_ratio")]
    assert "NOT exact" in naive["verifier"].iloc[0]
    specs = chart_specs(at)
    assert len(specs) >= 5  # exit (exact), exit (own laws), exit (foil), lengths, bonus, latency
    optimal = titled(specs, "exit node: empirical vs exit law X(v)")
    names = [t["name"] for t in optimal[0]["data"]]
    assert names[0].startswith("exit law X(v)") and set(names[1:]) == {"tev", "predraw", "residual"}
    own = {t["name"] for s in titled(specs, "exit node: empirical vs greedy's own law") for t in s["data"]}
    assert own == {"greedy's own law (the T = 0 exit)", "greedy"}  # the legend names the law it tests
    assert titled(specs, "exit node: empirical vs chain's own law")
    lengths = titled(specs, "block length")[0]
    groups = {t["name"].split(",")[0]: t["legendgroup"] for t in lengths["data"]}
    assert groups["greedy"] != groups["tev"] and "T = 0" in groups["greedy"]
    line = lengths["layout"]["shapes"][0]
    expected = float(summary.loc[summary["verifier"] == "tev", "E[L] of its law"].iloc[0])
    assert line["x0"] == line["x1"] == pytest.approx(expected)  # the 1 + C mark sits at its value
    assert [t["name"] for t in lengths["data"]][0].startswith("naive_ratio")  # the foil first, under the others
    assert not any("cannot be caught" in i.value for i in at.info)


def test_verifier_comparison_at_t0_says_why_the_foil_cannot_be_caught():
    at = page("2_Verifier_comparison.py").run()
    at.number_input(key="vc_temp").set_value(0.0).run()
    assert not at.exception and not at.error
    assert any("cannot be caught" in i.value for i in at.info)
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    summary = at.dataframe[0].value
    standing = dict(zip(summary["verifier"], summary["at T = 0"]))
    assert standing["greedy"].startswith("exact, optimal")  # at T = 0 greedy is optimal: its law is X


def test_verifier_comparison_on_a_replayed_round_is_labelled_approximate():
    at = page("2_Verifier_comparison.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=2, budget=10))
    at.run()
    assert at.radio(key="vc_source").value == "a round from the tree explorer"
    assert any("APPROXIMATE" in w.value for w in at.warning)
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error


def test_verifier_comparison_reads_benchmark_rows(tmp_path):
    rows = [{"verifier": v, "budget": b, "speedup": 1 + b / 100, "mean_emitted": 1 + b / 20}
            for v in ("tev", "residual") for b in (8, 32)]
    from tevcore.results import ResultRecord, RunMeta

    meta = RunMeta.now("python -m tevcore bench", "cpu", 0)
    (tmp_path / "bench.json").write_text(json.dumps(ResultRecord("bench", meta, rows).to_dict()))
    (tmp_path / "rounds.json").write_text(json.dumps(ResultRecord("rounds-at-context", meta,
                                                                  [{"verifier": "rrs", "gap": 0.1}]).to_dict()))
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "old.json").write_text(json.dumps({"meta": {}, "rows": rows}))  # not the one record: named
    at = page("2_Verifier_comparison.py").run()
    at.text_input(key="vc_bench_folder").set_value(str(tmp_path)).run()
    assert not at.exception
    assert at.get("plotly_chart")
    assert any("broken.json" in w.value for w in at.warning) and any("old.json" in w.value for w in at.warning)
    runs = [frame.value for frame in at.dataframe if "command line" in frame.value]
    assert len(runs) == 1 and sorted(runs[0]["command"]) == ["bench", "rounds-at-context"]


def _fake_runs(root: Path) -> None:
    a = root / "run-a"
    a.mkdir(parents=True)
    (a / "config.json").write_text(json.dumps({"data": "x", "steps": 10}))
    (a / "status.json").write_text(json.dumps({"state": "running", "pid": 2**22 + 12345, "step": 3,
                                               "total_steps": 10, "started": 1.0, "updated": 31.0}))
    (a / "metrics.jsonl").write_text('{"step": 1, "loss": 3.0, "distill": 2.5, "tree": 1.0, "tree_E": 1.4}\n'
                                     '{"step": 2, "loss": 2.8, "distill": 2.4, "tree": 0.9, "tree_E": 1.5}\n{"st')
    b = root / "run-b"
    b.mkdir()
    (b / "config.json").write_text("{}")
    (b / "status.json").write_text("garbage")
    data = root / "data-x"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"shards": 1, "target_name": "tiny",  # as build-data writes it
                                                    "config": {"hidden_layers": [8, 16, 24, 30]}}))


def test_exittrain_lists_runs_and_reports_broken_ones(tmp_path):
    _fake_runs(tmp_path)
    at = page("3_ExitTrain.py").run()
    assert not at.exception
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    assert not at.exception
    table = at.dataframe[0].value
    states = dict(zip(table["run"], table["state"]))
    assert states == {"run-a": "crashed", "run-b": "unreadable"}  # run-a's process is gone
    assert bool(table.loc[table["run"] == "run-a", "resumable"].iloc[0])
    assert charts(at) >= 1  # the curves of the selected run
    assert any("gone without finishing" in e.value for e in at.error)


def test_exittrain_refuses_a_second_trigger_on_a_busy_folder(tmp_path):
    from tevcore.train.runs import busy_reason

    _fake_runs(tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / ".lock").write_text(str(os.getpid()))  # a live process holds the lock
    assert "in use" in busy_reason(busy)
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    at.text_input(key="et_name").set_value("busy").run()
    start = at.button(key="et_start")
    if start.disabled:
        pytest.skip("the training CLI is not available in this checkout")
    start.click().run()
    assert not at.exception
    assert any("Refused" in e.value and "in use" in e.value for e in at.error)


def test_workshop_recomputes_and_steps_without_a_model():
    at = page("4_Exit_law_workshop.py").run()
    assert not at.exception and not at.error
    assert [m.label for m in at.metric][:4] == ["tree nodes", "coverage C", "1 + C", "sum of X"]
    assert at.metric[2].value == "2.8640"
    assert charts(at) >= 6
    at.selectbox(key="ws_preset").set_value("loses most mass at the root").run()
    assert not at.exception
    assert float(at.metric[1].value) < 0.5
    slider = at.slider[0]
    slider.set_value(slider.max).run()
    assert not at.exception
    assert any("bonus" in c.value for c in at.caption)


@pytest.mark.parametrize("key, value, allowed", [
    ("ex_budget", 100_000, "[0, 512]"), ("ex_budget", -5, "[0, 512]"), ("ex_temp", 7.0, "[0, 5]"),
    ("ex_temp", -1.0, "[0, 5]"), ("ex_max_new", 0, "[1, 1024]"), ("ex_seed", -1, "[0, 4294967295]"),
])
def test_explorer_refuses_an_out_of_range_number_and_names_the_range(key, value, allowed):
    at = page("1_Tree_explorer.py").run()
    at.sidebar.number_input(key=key).set_value(value).run()
    assert not at.exception
    assert any(allowed in e.value and "Refused" in e.value for e in at.sidebar.error), [e.value for e in at.error]
    assert at.button(key="ex_step").disabled and at.button(key="ex_run").disabled  # never runs another value
    assert explorer_of(at).records == [] and explorer_of(at).generation is None


def test_explorer_takes_the_lower_bounds_from_the_engine_config():
    import inputs
    from tevcore.config import DecodeConfig

    for name in ("budget", "max_new_tokens", "temperature", "seed"):
        low = DecodeConfig.lowest(name)
        assert inputs.range_problem(name, low, inputs.decode_range(name, 10)) is None
        assert inputs.range_problem(name, low - 1, inputs.decode_range(name, 10)) is not None
        with pytest.raises(ValueError):
            DecodeConfig(**{name: low - 1})


def test_explorer_counts_nodes_one_way_folds_big_fans_and_shows_no_arrows():
    records = appdata.synthetic_records(rounds=1, budget=64, seed=2)
    at = page("1_Tree_explorer.py")
    put_explorer(at, records=records, done=True)
    at.run()
    assert not at.exception and not at.error
    assert [m.label for m in at.metric] == ["1 + C", "block length", "tree nodes", "depth"]
    assert all(not m.proto.delta for m in at.metric)  # none of them is a change: no up/down arrows
    assert at.metric[2].value == "64"
    tree = titled(chart_specs(at), "round 0")[0]
    title = tree["layout"]["title"]["text"]
    assert "64 nodes" in title and "of 64 nodes" in title and "65" not in title
    assert any(t.get("name", "").startswith("folded siblings") for t in tree["data"])
    assert any(a["text"].startswith("+") for a in tree["layout"]["annotations"])
    assert at.slider(key="ex_fan").value == 6


def test_workshop_keeps_each_presets_edits_across_a_preset_switch():
    edited = appdata.workshop_presets()["chain"].copy()
    edited.loc[0, "p"] = 0.5  # 'The' after the root: 0.8 -> 0.5
    at = page("4_Exit_law_workshop.py")
    put_workshop(at, WorkshopSession(edits={"chain": edited}, shown="bushy"))  # kept from an edit before a switch
    at.run()
    assert not at.exception and not at.error
    chain_e = 1 + 0.5 + 0.5 * 0.7 + 0.5 * 0.7 * 0.6 + 0.5 * 0.7 * 0.6 * 0.5
    assert at.metric[2].value == f"{chain_e:.4f}"  # the edit came back with the preset
    assert float(at.metric[2].value) == pytest.approx(1 + float(at.metric[1].value), abs=1e-12)  # C, 1 + C alike
    at.selectbox(key="ws_preset").set_value("bushy").run()
    at.selectbox(key="ws_preset").set_value("chain").run()
    assert at.metric[2].value == f"{chain_e:.4f}"
    at.button(key="ws_reset").click().run()
    assert at.metric[2].value == "2.8640"  # reset: the preset as shipped
    assert any("use their random numbers" in m.value or "random numbers" in m.value for m in at.markdown)


def test_workshop_refuses_p_outside_0_1_instead_of_clamping(monkeypatch):
    presets = appdata.workshop_presets()
    chain = presets["chain"].copy()
    chain.loc[1, "p"] = 1.7
    monkeypatch.setattr(workshop_tables, "workshop_presets", lambda: {"chain": chain})
    at = page("4_Exit_law_workshop.py").run()
    assert not at.exception
    assert any("p must lie in [0, 1], got 1.7" in e.value for e in at.error)
    assert charts(at) == 0  # nothing computed from a refused table
    monkeypatch.undo()
    at = page("4_Exit_law_workshop.py").run()
    at.number_input(key="ws_seed").set_value(-3).run()
    assert any("[0, ∞)" in e.value for e in at.error)


def test_exittrain_compare_refuses_two_identical_weight_files(tmp_path):
    run = tmp_path / "run-a"
    for name in ("checkpoint-40", "drafter"):
        (run / name).mkdir(parents=True)
        (run / name / "config.json").write_text("{}")
        (run / name / "model.safetensors").write_bytes(b"the same weights")
    (run / "config.json").write_text("{}")
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    assert not at.exception
    defaults = at.multiselect(key="et_cmp").value
    assert defaults == [str(run / "drafter"), str(APP.parent / "assets" / "drafter")]  # two different drafters
    assert not at.button(key="et_cmp_run").disabled
    at.multiselect(key="et_cmp").set_value([str(run / "checkpoint-40"), str(run / "drafter")]).run()
    assert any("exactly the same weights" in e.value for e in at.error)
    assert at.button(key="et_cmp_run").disabled


def test_explorer_target_field_reports_a_missing_folder(tmp_path):
    at = page("1_Tree_explorer.py").run()
    assert at.sidebar.text_input(key="ex_target").value == "default"  # the embedded target stays the default
    missing = tmp_path / "no-such-model"
    at.sidebar.text_input(key="ex_target").set_value(str(missing)).run()
    at.button(key="ex_step").click().run()
    assert not at.exception
    assert any("Could not start" in e.value and "no-such-model" in e.value for e in at.error)
    assert explorer_of(at).records == []


def test_explorer_opens_with_the_engines_defaults_and_builders():
    from tevcore.config import DEFAULT_BUDGET, SAMPLING_TEMPERATURE
    from tevcore.engine.builder_specs import builder_patterns

    at = page("1_Tree_explorer.py").run()
    assert not at.exception and not at.error
    assert at.sidebar.number_input(key="ex_budget").value == DEFAULT_BUDGET
    assert at.sidebar.number_input(key="ex_temp").value == SAMPLING_TEMPERATURE
    assert list(at.sidebar.selectbox(key="ex_builder").options) == builder_patterns()
    width = next(name for name in builder_patterns() if name.startswith("width:"))
    at.sidebar.selectbox(key="ex_builder").set_value(width).run()
    at.sidebar.text_input(key="ex_widths").set_value("3,2").run()
    assert not at.exception and not at.error
    at.sidebar.text_input(key="ex_widths").set_value("3,x").run()
    at.button(key="ex_step").click().run()  # a bad widths list is refused before any model work
    assert not at.exception
    assert any("Invalid settings" in e.value and "widths" in e.value for e in at.error), [e.value for e in at.error]
    assert explorer_of(at).records == []


def test_exittrain_shows_a_stopped_run_as_stopped_resumable_without_eta(tmp_path):
    run = tmp_path / "stopped-run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": "x", "steps": 200}))
    (run / "status.json").write_text(json.dumps({  # what the trainer writes on a stop (its process is gone)
        "state": "interrupted", "pid": 2**22 + 12345, "step": 100, "total_steps": 200, "started": 10.0,
        "updated": 110.0, "active_seconds": 100.0, "start_step": 0, "steps_began": 10.0}))
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    assert not at.exception
    assert [e.value for e in at.error if "distillation set" not in e.value] == []  # (the New run tab wants a set)
    assert at.dataframe[0].value["state"].tolist() == ["stopped (resumable)"]
    [bar] = at.get("progress")
    assert bar.text == "stopped (resumable): step 100/200 · elapsed 1m40s"  # no ETA, no "crashed"
    assert at.button(key="et_resume")


def test_exittrain_starts_from_the_committed_drafter_and_warns_when_warmup_covers_the_run(tmp_path):
    _fake_runs(tmp_path)
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    committed = str(APP.parent / "assets" / "drafter")
    assert at.selectbox(key="et_init").value == committed
    assert any(f"--init {committed}" in c.value for c in at.code)  # the command starts from it
    assert not any("warmup" in w.value for w in at.warning)
    at.number_input(key="et_steps_fine").set_value(10).run()
    assert any("warmup (10) >= steps (10)" in w.value for w in at.warning)
    at.selectbox(key="et_init").set_value("new").run()
    assert not any("--init" in c.value for c in at.code)


def test_exittrain_opens_at_the_packages_recipe_and_every_number_is_settable(tmp_path):
    """The page's numbers are the package's recipe (TrainConfig's, and the fine-tuning ones from a trained
    drafter), not its own: the learning rate and the edge floor included, and each one reaches the command."""
    from tevcore.train.config import TrainConfig
    from tevcore.train.recipes import recipe

    _fake_runs(tmp_path)
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    fine = recipe(fine_tune=True, short=True)
    assert fine["lr"] < TrainConfig.lr  # from the committed drafter: a small measured rate, not the from-scratch one
    assert at.number_input(key="et_lr_fine").value == pytest.approx(fine["lr"])
    assert at.number_input(key="et_alpha").value == pytest.approx(TrainConfig.tree_alpha)
    assert at.number_input(key="et_dropout_fine").value == pytest.approx(fine["dropout"])
    command = next(c.value for c in at.code if "--init" in c.value)
    assert f"--lr {fine['lr']}" in command and f"--tree-alpha {TrainConfig.tree_alpha}" in command
    at.number_input(key="et_lr_fine").set_value(3e-5).run()
    assert any("--lr 3e-05" in c.value for c in at.code)
    at.selectbox(key="et_init").set_value("new").run()
    assert at.number_input(key="et_lr_new").value == pytest.approx(TrainConfig.lr)


def test_exittrain_a_finished_data_set_is_ready_whatever_the_shards_box_says(tmp_path):
    from tevcore.train.data import MANIFEST, shard_path

    folder = tmp_path / "data-small"
    folder.mkdir()
    (folder / "build-data.log").write_text("done\n")
    (folder / MANIFEST).write_text(json.dumps({"shards": 1, "target_name": "tiny",
                                               "config": {"hidden_layers": [8, 16, 24, 30]}}))
    shard_path(folder, 0).write_bytes(b"x")
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    at.number_input(key="et_dshards").set_value(2).run()  # the box now asks for 2: the build planned 1
    assert not at.exception
    assert any("data-small is ready (1 shards)" in s.value for s in at.success)
    assert not [p for p in at.get("progress") if "building" in p.text]


def test_exittrain_compare_keeps_the_picked_pair_when_a_new_checkpoint_appears(tmp_path, monkeypatch):
    import shared_ui
    from tevcore.train import eval as engine_eval

    def checkpoint(run: Path, step: int, payload: bytes, updated: float) -> Path:
        folder = run / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(payload)
        (folder / "trainer.pt").write_bytes(b"x")
        (run / "config.json").write_text("{}")
        (run / "latest.json").write_text(json.dumps({"checkpoint": folder.name, "step": step}))
        (run / "status.json").write_text(json.dumps({"state": "finished", "step": step, "total_steps": step,
                                                     "updated": updated}))
        return folder

    first = checkpoint(tmp_path / "run-a", 50, b"weights 50", 100.0)
    committed = str(APP.parent / "assets" / "drafter")
    evaluated = []
    monkeypatch.setattr(shared_ui, "get_target", lambda spec: "target")
    monkeypatch.setattr(shared_ui, "get_proposer", lambda spec, target: spec)
    monkeypatch.setattr(engine_eval, "eval_prompts", lambda sets, n: ["a prompt"])
    monkeypatch.setattr(engine_eval, "evaluate", lambda target, proposer, *a, **k: evaluated.append(proposer) or [
        engine_eval.EvalCell(1.0, "4", 1, 3, 2.0, 2.0, float("nan"))])
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    assert at.multiselect(key="et_cmp").value == [str(first), committed]
    at.text_input(key="et_cmp_budgets").set_value("4").run()
    checkpoint(tmp_path / "run-b", 10, b"weights 10", 200.0)  # a run writes a newer checkpoint meanwhile
    at.run()
    assert at.multiselect(key="et_cmp").value == [str(first), committed]  # the picks are the user's
    at.button(key="et_cmp_run").click().run()
    assert not at.exception
    assert evaluated == [str(first), str(first) + "+lookup", committed, committed + "+lookup"]
    assert any(c.value == f"evaluated: `{first}` · `{committed}`" for c in at.caption)
    at.button(key="et_cmp_newest").click().run()  # asked for: the newest checkpoint against the committed drafter
    assert at.multiselect(key="et_cmp").value == [str(tmp_path / "run-b" / "checkpoint-10"), committed]


def test_exittrain_paired_comparison_shows_the_cli_command_and_the_prompts_it_needs(tmp_path, monkeypatch):
    import shared_ui
    from tevcore.train import eval as engine_eval

    other = tmp_path / "mine"
    other.mkdir()
    (other / "config.json").write_text("{}")
    (other / "model.safetensors").write_bytes(b"other weights")
    committed = str(APP.parent / "assets" / "drafter")
    calls = []
    monkeypatch.setattr(shared_ui, "get_target", lambda spec: "target")
    monkeypatch.setattr(shared_ui, "get_proposer", lambda spec, target: spec)
    monkeypatch.setattr(engine_eval, "eval_prompts", lambda sets, n: [f"{s}-{i}" for s in sets for i in range(n)])

    def paired(target, a, b, prompts, temperature, budgets, *args, **kwargs):
        calls.append((a, b, len(prompts), budgets))
        return [engine_eval.PairedCell(temperature, budget, "all", len(prompts), 40, a, b, 2.0, 2.04, 0.04, 0.03)
                for budget in budgets]

    monkeypatch.setattr(engine_eval, "paired_coverage", paired)
    at = page("3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    at.text_input(key="et_cmp_extra").set_value(str(other)).run()
    assert at.selectbox(key="et_pair_a").value == committed and at.selectbox(key="et_pair_b").value == str(other)
    assert any(c.value.startswith(f"python -m tevcore eval-drafter {committed} --compare {other} --budgets 8,16")
               and c.value.endswith("--lookup") for c in at.code)
    at.button(key="et_pair_run").click().run()
    assert not at.exception
    assert calls == [(committed + "+lookup", str(other) + "+lookup", 6, [8, 16])]  # 2 prompts x 3 sets, + lookup
    [table] = [d.value for d in at.dataframe if "B - A" in d.value.columns]
    assert table["prompts per set for s.e. ≤ δ/2"].tolist() == [18, 18]  # 6 x (0.03 / 0.01)^2 = 54 over 3 sets
    at.selectbox(key="et_pair_b").set_value(committed).run()
    assert any("A and B are the same drafter" in e.value for e in at.error)


def test_seed_widgets_take_every_seed_the_engine_takes():
    """One seed range, the engine's (`engine.sampling.MAX_SEED`, 2^32 - 1), in every widget that takes a seed."""
    from tevcore.engine.sampling import MAX_SEED

    at = page("2_Verifier_comparison.py").run()
    assert at.number_input(key="vc_seed").max == MAX_SEED
    at.number_input(key="vc_seed").set_value(MAX_SEED).run()
    assert not at.exception and at.number_input(key="vc_seed").value == MAX_SEED
    workshop = page("4_Exit_law_workshop.py").run()
    workshop.selectbox(key="ws_preset").set_value(next(iter(appdata.coupling_presets()))).run()
    assert workshop.number_input(key="ws_c_seed").max == MAX_SEED
    import inputs

    assert inputs.range_problem("seed", MAX_SEED, inputs.decode_range("seed", MAX_SEED)) is None


def test_exittrain_keeps_its_form_and_compare_settings_across_a_page_switch(tmp_path):
    """Issue 50: Streamlit forgets a page's widgets when another page is visited; the ExitTrain form went back to
    its defaults (the recipe's steps, batch, tree budget, λ) and Compare to its own picks and settings."""
    _fake_runs(tmp_path)
    at = page("Home.py").run()
    at.switch_page("pages/3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    at.selectbox(key="et_init").set_value("new").run()  # new weights: the form's from-scratch numbers
    at.number_input(key="et_steps_new").set_value(321)
    at.number_input(key="et_batch").set_value(16)
    at.number_input(key="et_budget").set_value(12)
    at.number_input(key="et_lambda").set_value(0.25)
    at.text_input(key="et_name").set_value("my-run")
    at.multiselect(key="et_cmp_variants").set_value(["alone"])
    at.text_input(key="et_cmp_budgets").set_value("4,chain")
    at.selectbox(key="et_ablation_pick").set_value(OWN_FILE).run()
    at.text_input(key="et_ablation_path").set_value(str(tmp_path / "ablation.json")).run()
    command = next(c.value for c in at.code if "tevcore train" in c.value)
    at.switch_page("pages/4_Exit_law_workshop.py").run()  # streamlit forgets the ExitTrain widgets here
    at.switch_page("pages/3_ExitTrain.py").run()
    assert not at.exception
    assert at.text_input(key="et_root").value == str(tmp_path) and at.text_input(key="et_name").value == "my-run"
    assert at.selectbox(key="et_init").value == "new"
    kept = {key: at.number_input(key=key).value for key in ("et_steps_new", "et_batch", "et_budget", "et_lambda")}
    assert kept == {"et_steps_new": 321, "et_batch": 16, "et_budget": 12, "et_lambda": 0.25}
    assert next(c.value for c in at.code if "tevcore train" in c.value) == command  # the same run would start
    assert at.multiselect(key="et_cmp_variants").value == ["alone"]
    assert at.text_input(key="et_cmp_budgets").value == "4,chain"
    assert at.text_input(key="et_ablation_path").value == str(tmp_path / "ablation.json")


def test_exittrain_compare_keeps_its_result_across_pages_and_says_when_the_settings_changed(tmp_path, monkeypatch):
    """Issue 50: the evaluation shown is kept with the request it was made with; after a page switch it is still
    shown, and once the settings differ the page says which."""
    import shared_ui
    from tevcore.train import eval as engine_eval

    monkeypatch.setattr(shared_ui, "get_target", lambda spec: "target")
    monkeypatch.setattr(shared_ui, "get_proposer", lambda spec, target: spec)
    monkeypatch.setattr(engine_eval, "eval_prompts", lambda sets, n: ["a prompt"])
    monkeypatch.setattr(engine_eval, "evaluate", lambda target, proposer, prompts, temperature, budgets, *a, **k: [
        engine_eval.EvalCell(1.0, str(budgets[0]), 1, 3, 2.0, 2.0, float("nan"))])
    at = page("Home.py").run()
    at.switch_page("pages/3_ExitTrain.py").run()
    at.text_input(key="et_root").set_value(str(tmp_path)).run()
    at.text_input(key="et_cmp_budgets").set_value("4").run()
    at.button(key="et_cmp_run").click().run()
    assert not at.exception and not [w.value for w in at.warning if "other settings" in w.value]
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    at.switch_page("pages/3_ExitTrain.py").run()
    assert any(c.value.startswith("evaluated: ") for c in at.caption)  # still shown
    at.text_input(key="et_cmp_budgets").set_value("4,8").run()
    assert any("came from other settings: budgets 4 (now 4, 8)" in w.value for w in at.warning), \
        [w.value for w in at.warning]


def test_explorer_shows_the_same_round_after_a_page_switch():
    """Issue 50 (the AppTest twin of test_browser_explorer's): streamlit forgets the round slider on another page;
    on a10088a the explorer came back at round 0."""
    at = page("Home.py").run()
    at.switch_page("pages/1_Tree_explorer.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=4, budget=8), done=True, source="test records")
    at.run()
    at.slider(key="ex_round").set_value(1).run()
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    at.switch_page("pages/1_Tree_explorer.py").run()
    assert not at.exception
    assert at.slider(key="ex_round").value == 1 and explorer_of(at).selected_round == 1


@pytest.mark.parametrize("other_tab_starts", ["never", "as the turn ends", "as the page draws"])
def test_a_run_shows_its_own_rounds_when_another_tab_starts_a_new_generation_as_it_ends(monkeypatch,
                                                                                       other_tab_starts):
    """A browser's tabs share one explorer session. When one tab's run ends and its turn passes to the same
    browser's other tab, that tab's new generation can replace the shared rounds before the first tab draws, or
    while it draws: the first tab then drew an empty page ("Press Run live"), and its run marked the other tab's
    generation finished. It shows the rounds its run made, says why where the other generation came first, and
    leaves the other generation as it is."""
    from types import SimpleNamespace

    import explorer_view
    from tevcore.studio import explorer as studio_explorer

    records = appdata.synthetic_records(rounds=2, budget=12)
    at = page("1_Tree_explorer.py")
    session = put_explorer(at)
    ours, others = (SimpleNamespace(prompt_ids=[1, 2], meta={}, drafter_note=None) for _ in range(2))

    def decode(seat, models, request, running, limit, on_start=None, on_round=None):
        on_start(ours)
        for record in records:
            on_round(record)
        if other_tab_starts == "as the turn ends":
            session.start_live(others, session.settings, 0.0)
        return studio_explorer.Decoded(started=ours, records=list(records), finished=True)

    drawn = explorer_view.show_view

    def show_view(shown, settings):
        if other_tab_starts == "as the page draws" and session.generation is ours:
            session.start_live(others, session.settings, 0.0)
        drawn(shown, settings)

    monkeypatch.setattr(studio_explorer, "decode", decode)
    monkeypatch.setattr(explorer_view, "show_view", show_view)
    at.run()
    at.button(key="ex_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = [i.value for i in at.info if "Another tab of this browser" in i.value]
    assert any("2 rounds · finished" in c.value for c in at.caption)  # this run's rounds, drawn
    assert charts(at) >= 6
    assert len(said) == (other_tab_starts == "as the turn ends")
    shared = explorer_of(at)
    replaced = other_tab_starts != "never"
    assert shared.generation is (others if replaced else ours)
    assert len(shared.records) == (0 if replaced else 2) and shared.done is not replaced
