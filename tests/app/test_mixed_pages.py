"""Mixed trees in the app: the explorer builds them and shows each fixed child apart from the drawn ones; the
verifier comparison's sampled source draws them and runs the rules the registry pairs with them."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import appdata
import figures
import sampled_view
from test_explorer_sampled import frames, sampled_session
from tevcore.engine.builder_specs import BUILDER_FAMILIES, parse_builder
from tevcore.studio.toy_rounds import draw_toy_rounds
from tevcore.verify.registry import RULES, rules_for

pytestmark = pytest.mark.usefixtures("one_thread_module")

PAGES = Path(__file__).resolve().parents[2] / "app" / "pages"
MIXED = "mixed:3,2,2"
FIXED, DRAWN = "fixed (top-1 of q)", "drawn from q"


def explorer() -> AppTest:
    return AppTest.from_file(str(PAGES / "1_Tree_explorer.py"), default_timeout=120)


def test_the_explorer_offers_mixed_shapes_with_rrs_and_the_foil_and_refuses_block_in_one_line():
    """The menu comes from the families; the verifiers are the registry's pairing: rrs and the foil (which runs on
    every tree) are offered, block is refused with the registry's reason."""
    at = explorer().run()
    patterns = at.sidebar.selectbox(key="ex_builder").options
    assert BUILDER_FAMILIES["mixed"].pattern in patterns and BUILDER_FAMILIES["mixed-wor"].pattern in patterns
    at.sidebar.selectbox(key="ex_builder").set_value(BUILDER_FAMILIES["mixed"].pattern).run()
    assert not at.exception and not at.error
    options = at.sidebar.selectbox(key="ex_verifier").options
    assert "rrs" in options and "block" not in options and RULES["naive_ratio"].display in options
    example = parse_builder(f"mixed:{BUILDER_FAMILIES['mixed'].example}")
    assert options == [RULES[name].display for name in rules_for(example)]  # the registry's pairing
    captions = [c.value for c in at.sidebar.caption]
    assert any(c.startswith("block: ") and "sampled:1,1" in c for c in captions)
    assert not any(c.startswith("naive_ratio: ") for c in captions)
    at.sidebar.selectbox(key="ex_builder").set_value(BUILDER_FAMILIES["mixed-wor"].pattern).run()
    at.sidebar.text_input(key="ex_draws").set_value("2,0").run()
    assert any(e.value.startswith("Refused:") and "positive integers" in e.value for e in at.sidebar.error)


def test_a_mixed_rrs_round_shows_its_fixed_children_apart_from_the_drawn_ones():
    made = sampled_session(at := explorer(), builder=MIXED)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    record = made[-1][0]
    draws = frames(at, "draws")[0]
    assert draws["kind"].tolist() == [FIXED if f else DRAWN for f in record.tree.draws.fixed.tolist()]
    first = draws.groupby("at node")["kind"].first()
    assert (first == FIXED).all() and (draws["kind"] == DRAWN).any()  # each node's first child is its fixed one
    assert any("first child at each node is FIXED" in c.value for c in at.caption)
    trail = frames(at, "trail")[0]
    assert [0] + trail[trail["outcome"] == "accepted"]["child"].tolist() == record.path
    tries = trail.dropna(subset=["kind"])
    for _, at_node in tries.groupby("at node", sort=False):  # rrs tries the drawn siblings first, the fixed last
        kinds = at_node["kind"].tolist()
        assert kinds == sorted(kinds, key=lambda kind: kind == FIXED)
    assert (tries.loc[tries["kind"] == FIXED, "proposal of its token"] == 1.0).all()
    assert tries.loc[tries["kind"] == DRAWN, "divided by"].str.startswith("q without the fixed child").all()
    assert any("each divided by that proposal" in c.value for c in at.caption)


def test_the_tree_figure_marks_the_fixed_children_with_a_legend_entry():
    record, _ = appdata.synthetic_record(budget=12, seed=3, builder=MIXED, verifier="rrs")
    fig = figures.record_tree_figure(record)
    marks = [trace for trace in fig.data if trace.name and trace.name.startswith("fixed child")]
    assert len(marks) == 1 and len(marks[0].x) == int(record.tree.draws.fixed.sum())
    plain = figures.record_tree_figure(appdata.synthetic_record(budget=6)[0])
    assert not any(trace.name and trace.name.startswith("fixed child") for trace in plain.data)


def test_the_why_longer_caption_is_worded_for_the_design_and_silent_at_zero_temperature():
    mixed, _ = appdata.synthetic_record(budget=12, seed=3, builder=MIXED, verifier="rrs")
    sampled, _ = appdata.synthetic_record(budget=12, seed=3, builder="sampled:3,2,2", verifier="rrs")
    assert "without the fixed child" in appdata.over_draws_note("rrs", mixed.tree, 1.0)
    assert "without the fixed child" not in appdata.over_draws_note("rrs", sampled.tree, 1.0)
    assert appdata.over_draws_note("rrs", mixed.tree, 0.0) is None and appdata.over_draws_note("tev") is None


def test_hover_text_says_fixed_or_drawn():
    record, _ = appdata.synthetic_record(budget=12, seed=3, builder=MIXED, verifier="rrs")
    tree = record.tree
    children, _ = tree.draws.at(0)
    assert figures.node_draws_text(tree, children[0]).startswith("fixed at node 0: its top-1 child of q")
    assert "after the drawn siblings" in figures.node_draws_text(tree, children[0])
    drawn = [c for c in tree.children()[0] if c != children[0]]
    assert drawn and "from q without the fixed child" in figures.node_draws_text(tree, drawn[0])


def test_the_comparisons_sampled_source_draws_mixed_trees_and_rrs_follows_the_target():
    at = AppTest.from_file(str(PAGES / "2_Verifier_comparison.py"), default_timeout=300).run()
    at.radio(key="vc_source").set_value(sampled_view.SOURCE).run()
    at.number_input(key="vc_s_rounds").set_value(60).run()
    at.text_input(key="vc_s_builder").set_value("mixed:3,2,1").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error
    summary = at.dataframe[0].value
    standing = dict(zip(summary["verifier"], summary["at T = 1"]))
    assert standing["rrs"].startswith("exact over the tree's draws")
    assert "block" not in standing
    foil = RULES["naive_ratio"].display
    assert standing[foil] == RULES["naive_ratio"].on_drawn  # runs beside rrs, its entry saying why it is not exact
    assert float(summary.loc[summary["verifier"] == "rrs", "exit χ² p (vs its law)"].iloc[0]) > 1e-4
    at.button(key="vc_s_run_rounds").click().run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "E[1 + C]" in d.value.columns).set_index("verifier")
    assert table.loc["rrs", "first token χ² p (vs the target's row)"] > 1e-4
    ceilings = [d.value for d in at.dataframe if "ceiling" in d.value.columns]
    assert len(ceilings) == 2 and set(ceilings[0]["design"]) <= {"mixed", "fixed"}  # drawn trees + rrs, best-first
    assert (ceilings[1]["design"] == "fixed").all() and (ceilings[1]["gap"].abs() < 1e-9).all()
    drawn = draw_toy_rounds(parse_builder("mixed:3,2,1"), 60, 16, 1.0, 0)
    assert all(tree.draws.mixed for tree, _ in drawn.rounds)


def test_the_workshop_steps_through_both_orders_of_a_mixed_node():
    from tevcore.studio.workshop_tables import MIXED_PRESET

    at = AppTest.from_file(str(PAGES / "4_Exit_law_workshop.py"), default_timeout=120).run()
    at.selectbox(key="ws_preset").set_value(MIXED_PRESET).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    metrics = {m.label: float(m.value) for m in at.metric}
    old, new = metrics["fixed first (the earlier order)"], metrics["siblings first (rrs)"]
    ceiling = metrics["the design's ceiling p(a) + Σ min(p, q′)"]
    assert old < new == pytest.approx(ceiling, abs=1e-4)  # the preset shows the gain, and the ceiling reached
    at.slider(key="ws_m_step").set_value(2).run()
    new_order, old_order = [d.value for d in at.dataframe if "divided by" in d.value.columns]  # page order
    assert new_order["kind"].tolist() == ["drawn sibling", "fixed guess"]
    assert old_order["kind"].tolist() == ["fixed guess", "drawn sibling"]
    assert new_order["divided by"].iloc[1].endswith("(point mass)") and "q′" in new_order["divided by"].iloc[0]
    assert "—" not in new_order["outcome"].tolist()
    at.number_input(key="ws_m_seed").set_value(5).run()
    assert not at.exception and not at.error
