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
