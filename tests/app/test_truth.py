"""What the pages claim about laws and bounds states its scope and agrees with the numbers beside it; the labels a
newcomer needs are there (AppTest: the page's own text and numbers, no browser)."""

from __future__ import annotations

import dataclasses
import subprocess

import appdata
import pytest
from streamlit.testing.v1 import AppTest

from comparison_state import ComparisonSession
from explorer_kit import live_explorer, put_explorer
from explorer_state import ExplorerSession
from page_state_kit import page_state_key
from test_pages import APP, chart_specs, page, titled

SAMPLED_SOURCE = "sampled trees (toy target, fresh draws at one context)"


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_home_scopes_the_bound_expands_tev_and_defines_m_before_using_it():
    text = markdown(page("Home.py").run())
    assert "TEV (Tree Exit Verification" in text
    assert text.index("`m(v)` is") < text.index("X(v) = P(v)(1 - m(v))")
    assert "exact on every given tree (tev, predraw, residual, chain)" in text
    assert "exact only over the draw of the tree" in text and "rrs, block" in text
    assert "no exact verifier can accept" not in text  # the unscoped claim the coupling preset refutes


def test_workshop_bound_is_scoped_and_quotes_the_coupling_presets_own_numbers():
    at = page("4_Exit_law_workshop.py").run()
    plain = next(m.value for m in at.markdown if m.value.startswith("**The law in plain words.**"))
    assert "no exact verifier can accept" not in plain
    assert "exact on every given tree" in plain and "exact only over the draw of the tree" in plain
    preset = next(name for name in appdata.coupling_presets())
    at.selectbox(key="ws_preset").set_value(preset).run()
    metrics = {m.label: m.value for m in at.metric}
    sampled, fixed = metrics["sampled node + rrs: 1 − TV(p, q)"], metrics["fixed node accepted: p(x)"]
    assert float(sampled) > float(fixed)  # a sampled node beats P(v): the bound cannot bind proposal-ratio rules
    assert f"accepted with {sampled} where the fixed guess gets {fixed}" in plain


@pytest.fixture(scope="module")
def across_rounds() -> AppTest:
    at = page("2_Verifier_comparison.py").run()
    at.radio(key="vc_source").set_value(SAMPLED_SOURCE).run()
    at.number_input(key="vc_s_rounds").set_value(300).run()
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    at.button(key="vc_s_run_rounds").click().run()
    assert not at.exception and not at.error
    return at


def test_across_rounds_says_only_the_optimal_rules_close_the_gap_and_the_table_agrees(across_rounds):
    at = across_rounds
    caption = next(c.value for c in at.caption if c.value.startswith("Each rule verifies every one"))
    assert "An exact-given-tree rule has E[L | tree] = 1 + C(tree)" not in caption
    assert "Only the optimal rules (tev, predraw, residual) have E[L | tree] = 1 + C(tree)" in caption
    table = next(d.value for d in at.dataframe if "gap E[L] − E[1 + C]" in d.value.columns).set_index("verifier")
    for name in ("tev", "predraw", "residual"):  # what the caption says of them, the numbers beside it show
        assert abs(table.loc[name, "gap E[L] − E[1 + C]"]) < 4 * table.loc[name, "gap ± s.e."]
    assert "chain" in caption.split("do not follow X")[0]  # chain is named among the rules whose gap need not be 0
    assert table.loc["chain", "gap E[L] − E[1 + C]"] < 0  # exact with its own law: short of 1 + C on these trees


def test_across_rounds_compares_trees_of_equal_size_and_states_the_sizes(across_rounds):
    at = across_rounds
    drawn = at.session_state[page_state_key(ComparisonSession)].toy_drawn.value
    mean, low, high = drawn.sizes()
    assert drawn.best_first[0].size == high  # the fixed tree is as large as the largest drawn tree
    chart = titled(chart_specs(at), "across rounds: each rule's E[L]")[0]
    notes = " ".join(a["text"] for a in chart["layout"]["annotations"])
    assert "same budget" not in notes and f"fixed best-first ({high} nodes)" in notes
    assert any(f"best-first tree of {high} nodes against sampled:3,2,1 trees of {mean:.1f} nodes" in c.value
               for c in at.caption)


def test_the_naive_rule_on_sampled_trees_says_what_the_registry_says(across_rounds):
    """On a tree drawn from its q the naive rule's first tokens pass the only test the page runs, so the page says
    why it is still NOT exact there, in its registry entry's words (an exact enumeration catches it)."""
    from tevcore.verify.registry import get_rule

    rule = get_rule("naive_ratio")
    at = across_rounds
    summary = at.dataframe[0].value
    naive = summary[summary["verifier"] == rule.display].iloc[0]
    standing_column = next(c for c in summary.columns if c.startswith("at T = "))
    assert rule.on_drawn and naive[standing_column] == rule.on_drawn
    rounds = next(d.value for d in at.dataframe if "standing" in d.value.columns)
    assert rule.display in set(rounds["verifier"])
    chart = titled(chart_specs(at), "across rounds: each rule's E[L]")[0]
    assert rule.display in {str(x) for x in chart["data"][0]["x"]}


def test_the_examples_results_survive_picking_another_bonus_node():
    at = page("2_Verifier_comparison.py").run()
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    before = at.dataframe[0].value
    nodes = at.selectbox(key="vc_bonus_node").options
    at.selectbox(key="vc_bonus_node").set_value(int(nodes[1].split(" ")[0])).run()
    assert not at.exception
    assert at.get("dataframe") and at.dataframe[0].value.equals(before)  # the results are still shown
    assert not any("Press **Run every verifier**" in i.value for i in at.info)


def test_the_explorer_says_why_rrs_exceeds_1_plus_c_and_which_law_the_exit_bars_are():
    at = page("1_Tree_explorer.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=3, budget=8, builder="sampled:2,2,1", verifier="rrs"),
                 done=True, source="test records")
    at.run()
    assert not at.exception
    assert any(c.value.startswith("Why a block can be longer than 1 + C: rrs is exact only over the draw")
               for c in at.caption)
    depth = titled(chart_specs(at), "exit mass by depth")[0]
    assert "not rrs's law" in depth["layout"]["title"]["text"]
    assert "not rrs's" in depth["data"][0]["name"]


def test_a_trimmed_round_says_so_and_from_how_many_nodes():
    records = appdata.synthetic_records(rounds=2, budget=12)
    records[1] = dataclasses.replace(records[1], drafted_size=records[1].tree.size + 5)
    at = page("1_Tree_explorer.py")
    put_explorer(at, records=records, done=True, source="test records")
    at.run()
    size = records[1].tree.size
    assert any(f"trimmed: the target scored the first {size} of the {size + 5} nodes drafted" in c.value
               for c in at.caption)


def test_a_replayed_trace_shows_its_own_prompt_temperature_builder_budget_and_seed(tmp_path):
    records = appdata.synthetic_records(rounds=2, budget=10)
    meta = {"target": "toy", "prompt": "Tell me a story",
            "config": {"temperature": 0.7, "builder": "best_first", "budget": 10, "verifier": "tev", "seed": 42}}
    at = page("1_Tree_explorer.py")
    put_explorer(at, records=records, done=True, source="trace t.jsonl", meta=meta)
    at.run()
    shown = " ".join(i.value for i in at.info)
    for part in ("'Tell me a story'", "temperature 0.7", "builder best_first", "budget 10", "seed 42"):
        assert part in shown


def test_a_drafter_trained_on_the_page_runs_with_the_context_lookup_in_the_explorer():
    at = page("1_Tree_explorer.py")
    put_explorer(at, active_drafter="runs/x/checkpoint-50")  # what the ExitTrain page's "Make this..." sets
    at.run()
    assert {"runs/x/checkpoint-50", "runs/x/checkpoint-50+lookup"} <= set(at.selectbox(key="ex_proposer").options)


def test_the_folders_the_app_writes_by_default_are_ignored_by_git():
    for path in ("traces/trace-1.jsonl.gz", "runs/exittrain-1/config.json"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=APP.parent).returncode == 0, path


def test_the_explorer_keeps_its_settings_across_pages_and_says_when_shown_rounds_differ():
    at = page("Home.py").run()
    at.switch_page("pages/1_Tree_explorer.py")
    live_explorer(at, appdata.synthetic_records(rounds=2, budget=8), [1, 2], budget=8)  # rounds made at budget 8
    at.run()
    at.number_input(key="ex_budget").set_value(24).run()
    at.switch_page("pages/4_Exit_law_workshop.py").run()  # streamlit forgets the explorer's widgets here
    at.switch_page("pages/1_Tree_explorer.py").run()
    assert not at.exception
    assert at.number_input(key="ex_budget").value == 24
    assert any("The rounds shown came from other settings: budget 8 (now 24)" in w.value for w in at.warning)


def test_a_drafter_made_active_after_the_explorer_was_visited_is_the_one_its_sidebar_selects():
    """Issue 50: once the explorer had been visited, its kept sidebar value was put back over ExitTrain's "Make this
    the explorer's drafter", and the next round ran the old drafter while ExitTrain said otherwise."""
    at = page("Home.py").run()
    at.switch_page("pages/1_Tree_explorer.py").run()  # visited: the sidebar keeps its drafter
    before = at.selectbox(key="ex_proposer").value
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    # what ExitTrain's button does (its callback, on that page's run)
    ExplorerSession.of(at.session_state).choose_drafter("runs/x/checkpoint-50", at.session_state)
    at.switch_page("pages/1_Tree_explorer.py").run()
    assert not at.exception
    assert at.selectbox(key="ex_proposer").value == "runs/x/checkpoint-50" != before
