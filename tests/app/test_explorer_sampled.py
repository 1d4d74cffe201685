"""The explorer on sampled trees: builder and verifier choice, the draws, the rrs and block trails, sibling diagnostics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import appdata
from explorer_kit import count_turns, explorer_of, put_explorer
from tevcore.lab.siblings import sibling_diagnostics

PAGE = Path(__file__).resolve().parents[2] / "app" / "pages" / "1_Tree_explorer.py"


def explorer(timeout: float = 120) -> AppTest:
    return AppTest.from_file(str(PAGE), default_timeout=timeout)


TABLES = {"draws": ("draw", "at node"), "trail": ("step", "at node"), "block trail": ("chain node", "token"),
          "siblings": ("depth", "rank")}


def frames(at: AppTest, table: str):
    """The page's tables of one kind, told apart by their first columns (AppTest does not expose keys)."""
    return [d.value for d in at.dataframe if tuple(d.value.columns[:2]) == TABLES[table]]


def sampled_session(at: AppTest, verifier: str = "rrs", rounds: int = 3, keep_logits: bool = True,
                    builder: str = "sampled:3,2,2"):
    made = [appdata.synthetic_record(budget=12, seed=7 + i, index=i, builder=builder, verifier=verifier)
            for i in range(rounds)]
    session = put_explorer(at, records=[record for record, _ in made], done=True, source="test records")
    if keep_logits:
        for i, (_, logits) in enumerate(made):
            session.keep_rows(i, logits)
    return made


def test_builder_choice_offers_sampled_shapes_and_only_the_verifiers_check_pairing_admits():
    at = explorer().run()
    assert not at.exception and not at.error
    assert "rrs" not in at.sidebar.selectbox(key="ex_verifier").options
    assert any(c.value.startswith("rrs: ") and "are not drawn from the drafter's q" in c.value for c in at.sidebar.caption)
    at.sidebar.selectbox(key="ex_builder").set_value("sampled:K1,K2,...").run()
    options = at.sidebar.selectbox(key="ex_verifier").options
    assert "rrs" in options and "block" not in options  # 3,2,1 draws a tree, not a chain
    assert any(c.value.startswith("block: ") and "sampled:1,1" in c.value for c in at.sidebar.caption)
    at.sidebar.text_input(key="ex_draws").set_value("1,1,1").run()
    assert {"rrs", "block"} <= set(at.sidebar.selectbox(key="ex_verifier").options)
    at.sidebar.selectbox(key="ex_verifier").set_value("block").run()
    at.sidebar.selectbox(key="ex_builder").set_value("best_first").run()  # block is no longer offered
    assert not at.exception
    assert at.sidebar.selectbox(key="ex_verifier").value in at.sidebar.selectbox(key="ex_verifier").options


@pytest.mark.parametrize("counts,message", [("0", "positive integer"), ("2,x", "draw counts")])
def test_bad_draw_counts_get_the_engines_one_line_error_and_start_nothing(counts, message):
    at = explorer().run()
    at.sidebar.selectbox(key="ex_builder").set_value("sampled-wor:K1,K2,...").run()
    at.sidebar.text_input(key="ex_draws").set_value(counts).run()
    assert not at.exception
    assert any(e.value.startswith("Refused:") and message in e.value for e in at.sidebar.error)
    assert "rrs" not in at.sidebar.selectbox(key="ex_verifier").options
    at.button(key="ex_step").click().run()
    assert not at.exception and explorer_of(at).records == []
    assert any("Invalid settings" in e.value and message in e.value for e in at.error)


def test_a_sampled_rrs_round_shows_its_draws_and_the_trail_of_its_own_verdict():
    made = sampled_session(at := explorer())
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    record = made[-1][0]
    draws = frames(at, "draws")[0]
    assert len(draws) == record.tree.draws.children.numel()
    assert draws["q"].tolist() == pytest.approx(record.tree.draws.q.tolist())
    trail = frames(at, "trail")[0]
    accepted = trail[trail["outcome"] == "accepted"]["child"].tolist()
    assert [0] + accepted == record.path
    assert trail["outcome"].iloc[-1].startswith(f"exit at node {record.exit_node}")
    assert any("trail of this round's verdict" in m.value for m in at.markdown)
    assert any(c.value.startswith(f"node {record.exit_node}: ") and "drew" in c.value for c in at.caption)


def test_a_tev_round_on_a_sampled_tree_shows_a_fresh_rrs_verdict_and_a_trace_shows_no_trail():
    sampled_session(at := explorer(), verifier="tev")
    at.run()
    assert not at.exception and not at.error
    assert any("verified by tev" in m.value and "drawn now" in m.value for m in at.markdown)
    sampled_session(at := explorer(), keep_logits=False)
    at.run()
    assert not at.exception and not at.error
    assert frames(at, "draws") and not frames(at, "trail")
    assert any("a trace keeps neither" in i.value for i in at.info)
    assert not any("The verifier comparison draws many" in c.value for c in at.caption)  # no context to draw at


def test_a_block_round_on_a_sampled_chain_shows_the_coins_of_its_own_verdict():
    made = sampled_session(at := explorer(), verifier="block", rounds=6, builder="sampled:1,1,1,1")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    record = made[-1][0]
    assert any("block trail of this round's verdict" in m.value for m in at.markdown)
    trail = frames(at, "block trail")[0]
    chain = trail.iloc[:-1]
    assert chain["chain node"].tolist() == list(range(1, record.tree.num_nodes))
    assert chain["q"].tolist() == pytest.approx(record.tree.draws.q.tolist())
    exit_node = len(record.path) - 1
    coins = dict(zip(chain["chain node"], chain["coin"]))
    assert all(coins[n] == "failed" for n in coins if n > exit_node)
    assert all(coins[n].startswith("not read") for n in coins if n < exit_node)
    assert exit_node == 0 or coins[exit_node].startswith("success")
    assert trail["coin"].iloc[-1].startswith("exit at")


def test_sibling_diagnostics_are_the_labs_over_the_shown_rounds():
    made = sampled_session(at := explorer(), rounds=4)
    at.run()
    assert not at.exception
    expected = sibling_diagnostics([record for record, _ in made])["by_rank"]
    table = frames(at, "siblings")[0]
    assert table[["depth", "rank", "nodes", "accepted"]].to_dict("records") == [
        {k: row[k] for k in ("depth", "rank", "nodes", "accepted")} for row in expected]
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    ranks = [s for s in specs if s["layout"].get("title", {}).get("text", "").startswith("accepted share by")]
    assert ranks and ranks[0]["layout"]["xaxis"]["type"] == "category"


def test_a_live_sampled_round_on_a_tiny_target_shows_the_trail_of_its_rrs_verdict(tiny_model_folder, monkeypatch):
    turns = count_turns(monkeypatch)
    at = explorer(timeout=180).run()
    at.sidebar.text_input(key="ex_target").set_value(str(tiny_model_folder("llama")))
    at.sidebar.selectbox(key="ex_proposer").set_value("rollout")
    at.sidebar.checkbox(key="ex_chat").set_value(False)
    at.sidebar.number_input(key="ex_budget").set_value(6)
    at.sidebar.number_input(key="ex_max_new").set_value(4)
    at.sidebar.selectbox(key="ex_builder").set_value("sampled:K1,K2,...").run()
    at.sidebar.text_input(key="ex_draws").set_value("2,2").run()
    at.sidebar.selectbox(key="ex_verifier").set_value("rrs").run()
    at.button(key="ex_step").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert len(turns) == 1  # the decode waited its turn in the server's compute queue
    record = explorer_of(at).records[0]
    assert record.tree.draws is not None and record.verifier == "rrs"
    assert any("The verifier comparison draws many at round 0's context" in c.value for c in at.caption)
    at.button(key="ex_trail_btn_0").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(turns) == 2 and explorer_of(at).has_rows(0)  # the re-scoring forward took a turn too, once
    at.run()
    assert len(turns) == 2
    trail = frames(at, "trail")[0]
    assert [0] + trail[trail["outcome"] == "accepted"]["child"].tolist() == record.path
    assert not [b for b in at.button if b.key == "ex_trail_btn_0"]  # the trail took the button's place


def test_trim_auto_with_a_sampled_builder_is_refused_before_any_model_loads(tmp_path):
    at = explorer().run()
    at.sidebar.text_input(key="ex_target").set_value(str(tmp_path / "no-model")).run()  # a load would fail on it
    at.sidebar.selectbox(key="ex_builder").set_value("sampled:K1,K2,...").run()
    at.sidebar.selectbox(key="ex_trim").set_value("auto").run()
    at.button(key="ex_step").click().run()
    assert not at.exception and explorer_of(at).records == []
    errors = [e.value for e in at.error]
    assert any("Invalid settings" in e and "sampled tree's draws do not survive" in e for e in errors), errors
    assert not any("Could not start" in e for e in errors)
