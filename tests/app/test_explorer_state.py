"""The explorer's click reading: a node click names a node, a click on a folded fan names its parent."""

from __future__ import annotations

import explorer_state


def selection(*customdata) -> dict:
    return {"selection": {"points": [{"customdata": c} for c in customdata]}}


def test_a_node_click_is_a_node_and_a_fold_click_is_a_fold():
    assert explorer_state.clicked_node(selection(7)) == 7 and explorer_state.clicked_fold(selection(7)) is None
    assert explorer_state.clicked_node(selection([5])) == 5
    assert explorer_state.clicked_fold(selection("more:3")) == 3
    assert explorer_state.clicked_node(selection("more:3")) is None  # opening a fan chooses no node
    for nothing in (None, {}, {"selection": {}}, selection(True), selection("more:x"), selection(None)):
        assert explorer_state.clicked_node(nothing) is None and explorer_state.clicked_fold(nothing) is None


def test_the_node_shown_falls_back_to_the_default_outside_its_round():
    assert explorer_state.node_for_round({0: 3}, 0, 5, 1) == 3
    assert explorer_state.node_for_round({0: 9}, 0, 5, 1) == 1
    assert explorer_state.node_for_round({0: "3"}, 0, 5, 1) == 1


def test_the_explorer_session_puts_back_what_streamlit_forgot_and_names_changed_settings():
    state = {"ex_budget": 24, "ex_builder": "chain", "ex_prompt_examples_0": "hi", "ex_prompt_ids": [1, 2],
             "ex_records": ["a round"], "vc_n": 5}
    session = explorer_state.ExplorerSession.of(state)
    assert explorer_state.ExplorerSession.of(state) is session  # one object per session
    session.keep(state)
    assert session.kept == {"ex_budget": 24, "ex_builder": "chain", "ex_prompt_examples_0": "hi"}  # settings only
    for key in ("ex_budget", "ex_builder", "ex_prompt_examples_0"):  # another page ran: streamlit dropped them
        del state[key]
    state["ex_builder"] = "best_first"  # a value set since is not overwritten
    session.restore(state)
    assert state["ex_budget"] == 24 and state["ex_builder"] == "best_first" and state["ex_prompt_examples_0"] == "hi"
    assert explorer_state.settings_changes({"budget": 8, "prompt": "a"}, {"budget": 24, "prompt": "b"}) == [
        "prompt (another text)", "budget 8 (now 24)"]
    assert explorer_state.settings_changes(None, {"budget": 24}) == []
