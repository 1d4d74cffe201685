"""Sampled trees in the app: the verifier comparison's sampled rounds and the workshop's coupling preset.

AppTest runs of both pages, the services behind them (`tevcore.studio.toy_rounds`,
`appdata.coupling`) checked against the engine, and their figures' category
axes.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from streamlit.testing.v1 import AppTest

import appdata
import figures
import sampled_view
from explorer_kit import count_turns, live_explorer, put_explorer
from page_state_kit import put_workshop
from test_figures import NUMERIC_LOOKING, _bars_all_on_a_category_axis
from test_pages import PAGES
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import target_flow
from tevcore.studio.rules import rules_for
from tevcore.studio.toy_rounds import draw_toy_rounds
from tevcore.verify.laws import exit_law
from workshop_state import WorkshopSession

pytestmark = pytest.mark.usefixtures("one_thread_module")

ROUNDS = 40


def page(name: str) -> AppTest:
    return AppTest.from_file(str(PAGES / name), default_timeout=300)


def specs(at: AppTest) -> dict[str, dict]:
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[str(spec["layout"].get("title", {}).get("text", ""))] = spec
    return out


def sampled_page(builder: str = sampled_view.DEFAULT_BUILDER) -> AppTest:
    at = page("2_Verifier_comparison.py").run()
    at.radio(key="vc_source").set_value(sampled_view.SOURCE).run()
    at.number_input(key="vc_s_rounds").set_value(ROUNDS).run()
    if builder != sampled_view.DEFAULT_BUILDER:
        at.text_input(key="vc_s_builder").set_value(builder).run()
    return at


# ---------------------------------------------------------------- verifier comparison on sampled trees

def test_sampled_rounds_run_every_valid_rule_and_compare_tev_with_rrs_on_one_tree():
    at = sampled_page()
    assert not at.exception and not at.error
    at.number_input(key="vc_s_round").set_value(3).run()
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error
    summary = at.dataframe[0].value
    standing = dict(zip(summary["verifier"], summary["at T = 1"]))
    assert standing["rrs"].startswith("exact over the tree's draws")
    assert "block" not in standing  # not a chain: the registry's pairing check leaves block out
    assert all(standing[n].startswith("exact, optimal") for n in ("tev", "predraw", "residual"))
    exact = summary[summary["at T = 1"].str.startswith("exact") & ~summary["verifier"].eq("greedy")]
    assert set(exact["verifier"]) == {"tev", "predraw", "residual", "chain", "rrs"}
    assert (exact["exit χ² p (vs its law)"] > 1e-4).all()  # rrs against its own law on this tree
    assert (exact["bonus χ² p (all exits, vs its law)"] > 1e-4).all()
    # the picked tree is round 3 of the service's draws; the chart's bars are the engine's laws on it
    drawn = draw_toy_rounds(parse_builder(sampled_view.DEFAULT_BUILDER), ROUNDS, 16, 1.0, 0)
    tree, logits = drawn.rounds[3]
    x = exit_law(tree, logits, 1.0).exit_mass.numpy()
    chart = specs(at)["one realised tree: TEV's exit law against rrs's outcomes"]
    names = [t["name"] for t in chart["data"]]
    assert names == ["TEV's exit law X(v) (this tree)", "rrs's own law (this tree)", "rrs: empirical"]
    assert chart["layout"]["xaxis"]["type"] == "category"
    assert sorted(chart["data"][0]["y"], reverse=True)[:3] == pytest.approx(sorted(x, reverse=True)[:3])
    rrs_law = float(summary.loc[summary["verifier"] == "rrs", "E[L] of its law"].iloc[0])
    tev_law = float(summary.loc[summary["verifier"] == "tev", "E[L] of its law"].iloc[0])
    assert tev_law == pytest.approx(target_flow(tree, logits, 1.0).expected_length)
    assert rrs_law != pytest.approx(tev_law)  # rrs's law on one tree is not TEV's...
    assert any("exact over the draw of the tree" in c.value for c in at.caption)  # ...and the page says why


def test_across_rounds_every_rule_sees_the_same_trees_and_exact_rules_emit_target_samples():
    at = sampled_page()
    at.button(key="vc_s_run_rounds").click().run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "E[1 + C]" in d.value.columns)
    drawn = draw_toy_rounds(parse_builder(sampled_view.DEFAULT_BUILDER), ROUNDS, 16, 1.0, 0)
    mean_c = np.mean([target_flow(tree, logits, 1.0).expected_length for tree, logits in drawn.rounds])
    assert table["E[1 + C]"].to_numpy() == pytest.approx(np.full(len(table), mean_c))  # one yardstick for all
    by_rule = table.set_index("verifier")
    for name in ("tev", "predraw", "residual"):  # exact given the tree: E[L | tree] = 1 + C(tree)
        assert abs(by_rule.loc[name, "gap E[L] − E[1 + C]"]) < 4 * by_rule.loc[name, "gap ± s.e."]
    for name in ("tev", "rrs"):  # exact over the draws: the first token is a sample of the context's row
        assert by_rule.loc[name, "first token χ² p (vs the target's row)"] > 1e-4
    assert by_rule.loc["rrs", "E[L]"] > by_rule.loc["rrs", "E[1 + C]"]  # on this toy pair the draws pay
    chart = specs(at)["across rounds: each rule's E[L] against E[1 + C] of the same trees"]
    lines = {shape["line"]["dash"]: shape["y0"] for shape in chart["layout"]["shapes"] if shape["type"] == "line"}
    assert lines["dash"] == pytest.approx(mean_c)
    fixed_tree, fixed_logits = drawn.best_first  # the other school at the same size: TEV's E[L] is its 1 + C
    assert not fixed_tree.sampled and fixed_tree.size == max(tree.size for tree, _ in drawn.rounds) <= 16
    assert lines["dot"] == pytest.approx(target_flow(fixed_tree, fixed_logits, 1.0).expected_length)
    assert chart["layout"]["xaxis"]["type"] == "category"
    assert chart["data"][0]["y"] == pytest.approx(table["E[L]"].tolist())


def test_a_sampled_chain_runs_block_and_bad_builders_are_refused():
    at = sampled_page("sampled:1,1,1")
    assert not at.exception and not at.error
    at.number_input(key="vc_n").set_value(3_000)
    at.button(key="vc_run").click().run()
    summary = at.dataframe[0].value
    block = summary[summary["verifier"] == "block"]
    assert len(block) == 1 and float(block["exit χ² p (vs its law)"].iloc[0]) > 1e-4
    for bad, message in (("best_first", "builds fixed trees"), ("sampled:0", "positive integer"),
                         ("sampled:x", "draw counts"), ("sampled:1,1,1,1,1", "needs 5 draft depths")):
        at.text_input(key="vc_s_builder").set_value(bad).run()
        assert not at.exception
        assert any("Refused" in e.value and message in e.value for e in at.error), (bad, [e.value for e in at.error])


def test_a_live_sampled_round_from_the_explorer_runs_rrs_on_its_rescored_rows(tiny_model_folder, monkeypatch):
    """A round the decoding loop drew with a sampled builder on a tiny target: the page re-scores its tree and
    offers the rules the registry pairs with that builder, at the temperature the tree was drawn at."""
    from tevcore.config import DecodeConfig
    from tevcore.decoding.loop import rounds
    from tevcore.proposers.base import GreedyRolloutProposer
    from tevcore.target.loading import load_target

    folder = str(tiny_model_folder("llama"))
    prompt = [5, 9, 13, 21, 8]
    config = DecodeConfig(max_new_tokens=6, temperature=0.8, budget=6, builder="sampled:2,2", verifier="rrs", seed=3)
    records = list(rounds(load_target(folder, device="cpu"), GreedyRolloutProposer(depth=2), prompt, config))
    index = next(i for i, r in enumerate(records) if r.tree.size > 1)
    at = page("2_Verifier_comparison.py")
    session = live_explorer(at, records, prompt, folder, builder=config.builder, budget=6)
    session.selected_round = index
    turns = count_turns(monkeypatch)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("re-scored" in c.value for c in at.caption)
    assert turns and session.has_rows(index)  # queued like every model computation; kept for the explorer
    taken = len(turns)
    at.run()
    assert len(turns) == taken  # the rows, the tree's law and the result files are kept: a rerun queues nothing
    assert any("A sampled tree (sampled:2,2): studied at its round's T = 0.8" in c.value for c in at.caption)
    assert "rrs" in at.multiselect[0].options and "block" not in at.multiselect[0].options
    at.number_input(key="vc_n").set_value(4_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error
    summary = at.dataframe[0].value
    rrs = summary[summary["verifier"] == "rrs"]
    assert float(rrs["exit χ² p (vs its law)"].iloc[0]) > 1e-4
    assert "one realised tree: TEV's exit law against rrs's outcomes" in specs(at)


def _live_explorer_state(at: AppTest, folder: str, builder: str) -> tuple[list, list[int]]:
    """A live explorer generation on a tiny target in the page's session state (as the explorer leaves it)."""
    from tevcore.config import DecodeConfig
    from tevcore.decoding.loop import rounds
    from tevcore.proposers.base import GreedyRolloutProposer
    from tevcore.target.loading import load_target

    prompt = [5, 9, 13, 21, 8]
    config = DecodeConfig(max_new_tokens=6, temperature=0.8, budget=6, builder=builder, verifier="tev", seed=3)
    records = list(rounds(load_target(folder, device="cpu"), GreedyRolloutProposer(depth=4), prompt, config))
    live_explorer(at, records, prompt, folder, builder=config.builder, budget=6, proposer="rollout").selected_round = 1
    return records, prompt


def test_trees_drawn_at_an_explorer_rounds_context_run_on_its_real_target(tiny_model_folder):
    """The live source: fresh sampled trees at an explorer round's context, drawn by the explorer's drafter and
    scored by its target when the button is pressed; every rule then runs on the picked tree and across rounds."""
    from tevcore.lab.context_rounds import rounds_at_context
    from tevcore.proposers import resolve_proposer
    from tevcore.target.loading import load_target

    folder = str(tiny_model_folder("llama"))
    at = page("2_Verifier_comparison.py")
    records, prompt = _live_explorer_state(at, folder, "best_first")
    at.run()
    at.radio(key="vc_source").set_value(sampled_view.LIVE_SOURCE).run()
    assert not at.exception and not at.error
    assert at.text_input(key="vc_l_builder").value == sampled_view.LIVE_BUILDER  # a fixed explorer tree: a default
    assert at.number_input(key="vc_l_temp").value == pytest.approx(0.8)  # the explorer round's temperature
    assert any("Draw the trees" in i.value for i in at.info)  # nothing drawn before the button
    at.number_input(key="vc_l_rounds").set_value(20).run()
    at.button(key="vc_l_draw").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("20 independent draws of sampled:2,1,1's tree by stand-in" in c.value and "explorer round 1" in c.value
               for c in at.caption)
    target = load_target(folder, device="cpu")
    context = appdata.round_context(prompt, records, 1)
    assert len(context) == records[1].context_length
    drawn = rounds_at_context(target, resolve_proposer("rollout", target), context, parse_builder("sampled:2,1,1"), 6, 0.8, 20,
                              0)
    at.number_input(key="vc_l_round").set_value(2).run()
    at.number_input(key="vc_n").set_value(3_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error
    summary = at.dataframe[0].value
    assert float(summary.loc[summary["verifier"] == "tev", "E[L] of its law"].iloc[0]) == pytest.approx(
        target_flow(*drawn.rounds[2], 0.8).expected_length, abs=1e-4)  # the picked tree is the service's round 2
    at.button(key="vc_s_run_rounds").click().run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "E[1 + C]" in d.value.columns).set_index("verifier")
    mean_c = np.mean([target_flow(tree, logits, 0.8).expected_length for tree, logits in drawn.rounds])
    assert table.loc["rrs", "E[1 + C]"] == pytest.approx(mean_c, abs=1e-4)
    assert any("same drafter, target and context" in c.value for c in at.caption)
    at.text_input(key="vc_l_builder").set_value("width:2,1").run()
    at.button(key="vc_l_draw").click().run()
    assert any("Refused" in e.value and "builds fixed trees" in e.value for e in at.error)


def test_the_live_source_is_offered_only_for_a_live_generation():
    at = page("2_Verifier_comparison.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=2, budget=10))  # a loaded trace: no prompt
    at.run()
    assert sampled_view.LIVE_SOURCE not in at.radio(key="vc_source").options


def test_sampled_rounds_share_one_prefix_deterministic_target():
    drawn = draw_toy_rounds(parse_builder("sampled-wor:2,2"), 30, 8, 1.0, seed=5)
    rows: dict[tuple[int, ...], torch.Tensor] = {}
    for tree, logits in drawn.rounds:
        assert tree.sampled and tree.draws.mode == "wor" and tree.size <= 8
        tokens = tree.tokens.tolist()
        for node in range(tree.num_nodes):
            prefix = tuple(tokens[u] for u in tree.path(node)[1:])
            assert torch.equal(rows.setdefault(prefix, logits[node]), logits[node])  # the target is one function
    assert len(rows) > drawn.rounds[0][0].num_nodes  # the rounds drew different trees, sharing some prefixes
    assert rules_for(parse_builder("sampled-wor:2,2"))[-1] == "rrs"
    assert "block" in rules_for(parse_builder("sampled:1,1"))


# ---------------------------------------------------------------- the workshop's coupling preset

COUPLING = appdata.coupling_presets()
PRESET = next(iter(COUPLING))


def test_coupling_laws_come_from_the_engine_on_a_hand_case():
    found = appdata.coupling(pd.DataFrame({"token": ["a", "b", "c"], "p": [0.7, 0.2, 0.1], "q": [0.2, 0.5, 0.2]}))
    assert found.vocab == ["<root>", "a", "b", "c", "(other)"]  # q leaves 0.1 to '(other)'
    assert found.vocab[found.guess] == "b"  # the drafter's argmax
    assert found.fixed_accept == pytest.approx(0.2)  # p(b)
    assert found.sampled_accept == pytest.approx(0.2 + 0.2 + 0.1, abs=1e-6)  # sum of min(p, q) = 1 - TV
    for bad, message in (({"token": ["a"], "p": [1.2], "q": [0.5]}, "p must lie in [0, 1], got 1.2"),
                         ({"token": ["a", "a"], "p": [0.1, 0.1], "q": [0.1, 0.1]}, "once"),
                         ({"token": ["a", "b"], "p": [0.6, 0.6], "q": [0.1, 0.1]}, "p adds up to 1.200"),
                         ({"token": ["(other)"], "p": [0.1], "q": [0.1]}, "reserved")):
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
            appdata.coupling(pd.DataFrame(bad))


def test_coupling_preset_shows_a_fixed_guess_at_0_1_and_a_coupled_draw_at_1():
    at = page("4_Exit_law_workshop.py").run()
    at.selectbox(key="ws_preset").set_value(PRESET).run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["fixed node accepted: p(x)"] == "0.1000"
    assert metrics["sampled node + rrs: 1 − TV(p, q)"] == "1.0000"
    at.number_input(key="ws_c_rounds").set_value(400)
    at.button(key="ws_c_run").click().run()
    assert not at.exception and not at.error
    chart = specs(at)["depth-1 acceptance: a fixed guess against a coupled draw"]
    assert chart["layout"]["xaxis"]["type"] == "category"
    fixed_rate, sampled_rate = chart["data"][1]["y"]
    assert sampled_rate == 1.0  # p = q: rrs accepts every draw
    assert stats.binomtest(round(fixed_rate * 400), 400, 0.1).pvalue > 1e-3
    rows = specs(at)["the target's row p and the drafter's row q after the context"]
    assert rows["layout"]["xaxis"]["type"] == "category" and len(rows["data"][0]["x"]) == 10
    assert rows["data"][0]["x"][0].endswith("(fixed guess)")


def test_coupling_edits_survive_a_preset_switch_and_bad_edits_are_refused():
    edited = COUPLING[PRESET].copy()
    edited["p"] = [0.3] + [0.7 / 9] * 9  # the target now prefers the first token, the drafter's argmax
    at = page("4_Exit_law_workshop.py")
    put_workshop(at, WorkshopSession(edits={PRESET: edited}, shown="chain"))  # kept from an edit before a switch
    at.run()
    at.selectbox(key="ws_preset").set_value(PRESET).run()
    assert not at.exception and not at.error
    expected = {"fixed node accepted: p(x)": "0.3000", "sampled node + rrs: 1 − TV(p, q)": "0.8000"}  # 0.1 + 0.7
    assert {k: m.value for m in at.metric for k in expected if m.label == k} == expected
    at.selectbox(key="ws_preset").set_value("chain").run()
    at.selectbox(key="ws_preset").set_value(PRESET).run()
    assert {k: m.value for m in at.metric for k in expected if m.label == k} == expected
    at.button(key="ws_reset").click().run()
    assert {m.label: m.value for m in at.metric}["sampled node + rrs: 1 − TV(p, q)"] == "1.0000"
    bad = COUPLING[PRESET].copy()
    bad.loc[0, "q"] = 1.5
    at = page("4_Exit_law_workshop.py")
    put_workshop(at, WorkshopSession(edits={PRESET: bad}))
    at.run()
    at.selectbox(key="ws_preset").set_value(PRESET).run()
    assert not at.exception
    assert any("q must lie in [0, 1], got 1.5" in e.value for e in at.error)
    assert not at.get("plotly_chart")  # nothing computed from a refused table


# ---------------------------------------------------------------- figures

def test_sampled_and_coupling_charts_keep_numeric_looking_labels_on_a_category_axis():
    labels = [figures.short(t, 10) for t in NUMERIC_LOOKING]
    n = len(labels)
    law = np.linspace(0.3, 0.01, n)
    nodes = [f"{i} {label}" for i, label in enumerate(labels)]
    _bars_all_on_a_category_axis(figures.tev_against_rrs_figure(nodes, law, law[::-1], law), n)
    _bars_all_on_a_category_axis(figures.coupling_figure(labels, law, law[::-1], 2), n)
    lengths = {label: (1.5, 0.1) for label in labels}
    _bars_all_on_a_category_axis(figures.rounds_length_figure(lengths, (1.4, 0.05)), n)
    _bars_all_on_a_category_axis(figures.acceptance_figure({"7": 0.1, "7 ": 1.0}, {"7": (0.09, 0.01)}), 2)
