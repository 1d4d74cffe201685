"""The explorer's session object and its click reading (no streamlit): a node click names a node, a click on a
folded fan names its parent; the session keeps rounds, view, rows and settings, and says what changed."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

import appdata
import explorer_clicks
import explorer_state
from explorer_kit import opening_settings
from explorer_state import LIVE, SESSION_KEY, ExplorerSession
from tevcore.config import DecodeConfig
from tevcore.studio.explorer import LiveGeneration, live_meta


def selection(*customdata) -> dict:
    return {"selection": {"points": [{"customdata": c} for c in customdata]}}


def test_a_node_click_is_a_node_and_a_fold_click_is_a_fold():
    assert explorer_clicks.clicked_node(selection(7)) == 7 and explorer_clicks.clicked_fold(selection(7)) is None
    assert explorer_clicks.clicked_node(selection([5])) == 5
    assert explorer_clicks.clicked_fold(selection("more:3")) == 3
    assert explorer_clicks.clicked_node(selection("more:3")) is None  # opening a fan chooses no node
    for nothing in (None, {}, {"selection": {}}, selection(True), selection("more:x"), selection(None)):
        assert explorer_clicks.clicked(nothing) == (None, None)


def test_the_node_shown_falls_back_to_the_default_outside_its_round():
    assert explorer_state.node_for_round({0: 3}, 0, 5, 1) == 3
    assert explorer_state.node_for_round({0: 9}, 0, 5, 1) == 1
    assert explorer_state.node_for_round({0: "3"}, 0, 5, 1) == 1


def test_a_click_chooses_once_and_opens_a_fan_and_a_pick_outside_the_round_is_ignored():
    view = explorer_state.RoundView()
    view.take_click(0, (4, None), num_nodes=6)
    assert view.node(0, 6, default=1) == 4
    view.pick(0, 2, num_nodes=6)
    view.take_click(0, (4, None), num_nodes=6)  # the old selection seen again on a rerun: the pick stays
    assert view.node(0, 6, default=1) == 2
    view.take_click(0, (None, 3), num_nodes=6)
    assert view.fans(0) == {3} and view.node(0, 6, default=1) == 2
    view.pick(1, 9, num_nodes=6)  # not a node of round 1
    view.take_click(1, (True, "x"), num_nodes=6)
    assert view.node(1, 6, default=0) == 0 and view.fans(1) == set()


def test_the_session_is_one_object_under_one_key_and_puts_back_what_streamlit_forgot():
    state = {"ex_budget": 24, "ex_builder": "chain", "ex_prompt_examples_0": "hi", "ex_round": 1, "vc_n": 5}
    session = ExplorerSession.of(state)
    assert ExplorerSession.of(state) is session and state[SESSION_KEY] is session
    assert [key for key in state if isinstance(state[key], ExplorerSession)] == [SESSION_KEY]
    session.keep(state)
    assert session.kept == {"ex_budget": 24, "ex_builder": "chain", "ex_prompt_examples_0": "hi"}  # settings only
    for key in ("ex_budget", "ex_builder", "ex_prompt_examples_0"):  # another page ran: streamlit dropped them
        del state[key]
    state["ex_builder"] = "best_first"  # a value set since is not overwritten
    session.restore(state)
    assert state["ex_budget"] == 24 and state["ex_builder"] == "best_first" and state["ex_prompt_examples_0"] == "hi"
    state[SESSION_KEY] = "not a session"  # anything else under the key is replaced, never used
    assert isinstance(ExplorerSession.of(state), ExplorerSession)


def test_settings_changes_name_each_changed_setting_and_the_config_refuses_a_bad_builder():
    shown = opening_settings(budget=8)
    assert explorer_state.settings_changes(shown, replace(shown, budget=24, prompt="b")) == [
        "prompt (another text)", "budget 8 (now 24)"]
    assert explorer_state.settings_changes(None, shown) == []
    assert shown.config().budget == 8 and shown.config().builder == shown.builder
    meta = live_meta("toy", "hi", None, shown.config())
    assert meta["config"]["budget"] == 8 and "stop_tokens" not in meta["config"] and meta["prompt"] == "hi"
    with pytest.raises(ValueError, match="widths"):
        replace(shown, builder=None, builder_problem="widths must be integers").config()
    assert replace(shown, builder_problem="x") == shown  # the problem text is not a setting
    assert shown.sampled_builder is None  # the opening builder builds fixed trees
    drawn = DecodeConfig(builder="sampled:2,1").builder  # the engine's parse
    assert replace(shown, builder=drawn).sampled_builder == "sampled:2,1"


def test_a_live_generation_a_replay_and_a_new_start_replace_the_rounds_but_keep_the_widget_values():
    records = appdata.synthetic_records(rounds=3, budget=8)
    session = ExplorerSession(kept={"ex_budget": 8}, upload_id="u1", active_drafter="runs/r/checkpoint-5")
    settings = opening_settings(budget=8)
    session.start_live(LiveGeneration(iter(records), [1, 2], {"target": "t"}), settings, started=5.0)
    assert session.is_live and not session.is_trace and session.needs_new_generation(settings) is False
    assert session.needs_new_generation(replace(settings, budget=16))
    assert session.meta == {"target": "t"} and session.target_spec == settings.target
    assert session.active_drafter == "runs/r/checkpoint-5"  # ExitTrain's choice outlives a new generation
    running = session.generation
    for record in running.rounds:
        assert session.add(record, running)
    assert not session.add(records[0], LiveGeneration(iter([]), [1], {}))  # a round of another generation
    assert session.made_tokens == sum(len(r.emitted_tokens) for r in records)
    assert session.shown_changes(replace(settings, seed=3)) == ["seed 0 (now 3)"]
    assert session.seed_used(replace(settings, seed=3)) == 0  # the rounds' own seed
    assert session.context(1) == appdata.round_context([1, 2], records, 1)
    assert session.round_key(1) == (LIVE, 5.0, id(session.records), 1)
    session.view.pick(2, 1, num_nodes=5)
    session.replay(records[:2], {"config": {}}, "t.jsonl")
    assert session.source == "trace t.jsonl" and session.done and not session.is_live and session.is_trace
    assert session.view.nodes == {} and session.prompt_ids is None and session.shown_changes(settings) == []
    assert session.kept == {"ex_budget": 8} and session.upload_id == "u1"  # an upload still in its box stays opened
    with pytest.raises(ValueError, match="trace"):
        session.context(0)
    assert not session.takes_upload("u1") and session.takes_upload("u2") and not session.takes_upload("u2")
    session.forget()
    assert session.records == [] and session.source is None and session.kept == {"ex_budget": 8}


def test_a_runs_end_marks_its_own_generation_only_and_a_copy_shares_the_view_until_a_new_generation():
    """A browser's tabs share one session: a run that ended draws a copy of it (`explorer_run.run_or_step`). While
    its generation is the session's, the round chosen on the copy is the session's too; a new generation started
    by another tab gets a view of its own, and the old run's end does not mark it finished."""
    records = appdata.synthetic_records(rounds=3, budget=8)
    session, settings = ExplorerSession(), opening_settings(budget=8)
    ours, others = (LiveGeneration(iter(records), [1, 2], {}) for _ in range(2))
    session.start_live(ours, settings, started=1.0)
    shown = copy.copy(session)
    shown.records = list(records)
    assert shown.select(1) == 1 and session.selected_round == 1
    shown.saved = "saved t.jsonl"
    assert session.saved == "saved t.jsonl"
    assert session.finish(ours, finished=True) and session.done
    session.start_live(others, settings, started=2.0)
    assert not session.finish(ours, finished=True) and not session.done
    shown.select(2)
    assert session.selected_round == 0 and session.saved is None and shown.records == records


def test_the_view_follows_new_rounds_and_a_reset_follows_the_latest_again():
    session = ExplorerSession(records=appdata.synthetic_records(rounds=3, budget=8))
    assert session.new_round_to_follow() == 2 and session.new_round_to_follow() is None
    assert session.select(0) == 0 and session.selected_round == 0
    assert session.select(7) == 2 and session.select("2: x") == 2 and session.select(-1) == 0
    session.view.pick(1, 1, num_nodes=5)
    session.reset_view()
    assert session.view.nodes == {} and session.new_round_to_follow() == 2


def test_a_rounds_rows_are_scored_once_a_failure_is_said_and_not_retried_and_few_rounds_are_kept():
    session = ExplorerSession()
    calls = []

    def rescore():
        calls.append(1)
        return torch.ones(2, 3), 1e-7

    assert session.rows_for(0, rescore)[1] == 1e-7 and session.rows_for(0, rescore)[1] == 1e-7
    assert len(calls) == 1 and session.has_rows(0)

    def broken():
        calls.append(1)
        raise RuntimeError("context too long")

    for _ in range(2):
        with pytest.raises(ValueError, match="RuntimeError: context too long"):
            session.rows_for(1, broken)
    assert len(calls) == 2 and not session.has_rows(1)
    for index in range(2, 2 + explorer_state.KEPT_ROWS):
        session.keep_rows(index, torch.zeros(1))
    assert len(session.rows) == explorer_state.KEPT_ROWS and not session.has_rows(0)  # the oldest went first


def test_a_drafter_made_active_elsewhere_wins_over_the_one_the_sidebar_kept():
    """Issue 50: after the explorer was visited, ExitTrain's "Make this the explorer's drafter" was undone by the
    sidebar's kept value, and the next round ran the old drafter. The session owns the choice now."""
    state = {"ex_proposer": "default"}
    session = ExplorerSession.of(state)
    session.keep(state)  # the explorer ran with the committed drafter
    session.choose_drafter("runs/r/checkpoint-50", state)  # on the ExitTrain page (the box may still be held)
    session.restore(state)  # back on the explorer, before its widgets are drawn
    assert state["ex_proposer"] == "runs/r/checkpoint-50" and session.active_drafter == "runs/r/checkpoint-50"
