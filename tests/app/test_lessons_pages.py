"""The Lessons page with streamlit's AppTest (no model): a prediction is locked before the run, the run checks it
against the package's truth, a retry unlocks it, progress survives a page switch; in the room profile two
participants' answers reach the host's view (behind the secret) and its CSV, and a room going together offers only
the lessons the host opened."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tevcore.room.answers import AnswerBoard
from tevcore.studio.lessons import LESSONS, ChoiceAnswer

APP = Path(__file__).resolve().parents[2] / "app"
PAGE = "pages/5_Lessons.py"


def lessons_page() -> AppTest:
    return AppTest.from_file(str(APP / PAGE), default_timeout=120)


def predict(at: AppTest, key: str, value) -> AppTest:
    at.selectbox(key="ls_lesson").set_value(key).run()
    widget = at.radio(key=f"ls_pred_{key}") if isinstance(LESSONS[key].answer, ChoiceAnswer) else \
        at.number_input(key=f"ls_pred_{key}")
    widget.set_value(value).run()
    return at.button(key="ls_commit").click().run()


@pytest.fixture
def single_user(monkeypatch):
    monkeypatch.delenv("TEV_ROOM", raising=False)
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


@pytest.fixture
def room(monkeypatch, tmp_path):
    config = tmp_path / "room.toml"
    config.write_text(f'runs = "{tmp_path / "runs"}"\nspace_root = "{tmp_path / "spaces"}"\n')
    monkeypatch.setenv("TEV_ROOM", "1")
    monkeypatch.setenv("TEV_ROOM_CONFIG", str(config))
    monkeypatch.setenv("TEV_ROOM_SECRET", "open-sesame")
    st.cache_resource.clear()  # the room's services (and the answer board) are one per server: this test's
    yield tmp_path
    st.cache_resource.clear()


@pytest.mark.parametrize("key", list(LESSONS))
def test_each_lesson_locks_the_prediction_runs_and_checks_it_against_the_truth(single_user, key):
    truth = LESSONS[key].truth().value
    at = lessons_page().run()
    assert not at.exception
    assert not at.get("plotly_chart")  # nothing revealed before the prediction
    predict(at, key, truth)
    assert not at.exception
    assert [i.value for i in at.info] == [f"Your prediction (locked): **{truth:.4f}**" if isinstance(truth, float)
                                          else f"Your prediction (locked): **{truth}**"]
    assert not at.get("plotly_chart") and not at.success  # committed, still nothing revealed
    at.button(key="ls_run").click().run()
    assert not at.exception and not at.error
    assert len(at.success) == 1 and at.success[0].value.startswith("✓ Right.")
    assert at.get("plotly_chart")  # the figure the explanation points at
    assert any(LESSONS[key].explanation[:40] in m.value for m in at.markdown)


def test_a_wrong_prediction_is_shown_as_wrong_and_a_retry_unlocks_it(single_user):
    at = lessons_page().run()
    predict(at, "bonus-token", 0.3)
    at.button(key="ls_run").click().run()
    assert at.warning and at.warning[0].value.startswith("✗ Not this time. The truth is 0.7500 (within ±0.02)")
    at.button(key="ls_retry").click().run()
    assert at.number_input(key="ls_pred_bonus-token") is not None and not at.warning
    predict(at, "bonus-token", 0.75)
    at.button(key="ls_run").click().run()
    assert at.success[0].value.startswith("✓ Right.")
    assert at.session_state["ls_session"].of("bonus-token").attempts == 2


def test_committing_nothing_is_refused_in_one_line_and_locks_nothing(single_user):
    at = lessons_page().run()
    at.button(key="ls_commit").click().run()
    assert [e.value for e in at.error] == ["Refused: the prediction must be one of the 7 choices, got None"]
    at.selectbox(key="ls_lesson").set_value("coupling").run()
    at.button(key="ls_commit").click().run()
    assert [e.value for e in at.error] == ["Refused: the prediction must be a number, got None"]
    assert not at.info and all(p.prediction is None for p in at.session_state["ls_session"].progress.values())


def test_progress_survives_a_page_switch(single_user):
    at = AppTest.from_file(str(APP / "Home.py"), default_timeout=120).run()
    at.switch_page(PAGE).run()
    predict(at, "coupling", 0.76)
    at.button(key="ls_run").click().run()
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    assert not at.exception
    at.switch_page(PAGE).run()
    assert at.selectbox(key="ls_lesson").value == "coupling"
    assert at.info[0].value == "Your prediction (locked): **0.7600**"
    assert at.success[0].value.startswith("✓ Right.")


def test_the_single_user_profile_has_no_host_view(single_user):
    at = lessons_page().run()
    assert not at.tabs and not [t for t in at.text_input if t.key == "ls_host_secret"]


def test_two_participants_answers_reach_the_hosts_histogram_and_csv(room, monkeypatch):
    served = []
    board_csv = AnswerBoard.csv
    monkeypatch.setattr(AnswerBoard, "csv", lambda self, *a: served.append(board_csv(self, *a)) or served[-1])
    ada, bob = lessons_page().run(), lessons_page().run()
    ada.text_input(key="ls_name").set_value("ada").run()
    for at, value in ((ada, 0.75), (bob, 0.5)):
        predict(at, "coupling", value)
        at.button(key="ls_run").click().run()
    assert ada.success and bob.warning
    host = lessons_page().run()
    assert not host.get("plotly_chart") and not host.get("download_button")  # nothing of the room before the secret
    host.text_input(key="ls_host_secret").set_value("wrong").run()
    assert "Refused: that is not the host secret." in [e.value for e in host.error]
    host.text_input(key="ls_host_secret").set_value("open-sesame").run()  # too soon after a wrong guess: unchecked
    assert any("too many wrong guesses of the host secret" in e.value for e in host.error)
    time.sleep(1.1)  # the wait after one wrong guess (the room's one limit on guesses, as on the ExitTrain page)
    host.run()
    assert not host.exception
    charts = host.get("plotly_chart")
    assert len(charts) == 1  # only the coupling lesson has answers
    figure = json.loads(charts[0].proto.spec)
    assert sorted(figure["data"][0]["x"]) == [0.5, 0.75] and "(2 answered)" in figure["layout"]["title"]["text"]
    assert len(host.get("download_button")) == 1
    exported = list(csv.DictReader(io.StringIO(served[-1])))
    assert sorted((r["participant"], r["lesson"], r["prediction"], r["correct"]) for r in exported) == sorted(
        [("ada", "coupling", "0.75", "True"), (bob_id(bob), "coupling", "0.5", "False")])


def bob_id(bob: AppTest) -> str:
    caption = next(c.value for c in bob.caption if c.value.startswith("You answer as"))
    return caption.split("**")[1]


def test_a_room_going_together_offers_only_the_lessons_the_host_opened(room):
    host = lessons_page().run()
    host.text_input(key="ls_host_secret").set_value("open-sesame").run()
    host.run()
    host.radio(key="ls_pace").set_value("together: I open the lessons one by one").run()
    guest = lessons_page().run()
    assert guest.selectbox(key="ls_lesson").options == [f"1. {LESSONS['largest-x'].title}"]
    host.button(key="ls_open_next").click().run()
    guest.run()
    assert len(guest.selectbox(key="ls_lesson").options) == 2


def test_a_name_another_participant_holds_is_refused_in_one_line(room):
    ada, bob = lessons_page().run(), lessons_page().run()
    ada.text_input(key="ls_name").set_value("ada").run()
    bob.text_input(key="ls_name").set_value("ada").run()
    assert [e.value for e in bob.error] == ["Refused: the name 'ada' is taken in this room: choose another"]
    assert any(c.value.startswith("You answer as **p-") for c in bob.caption)
    assert any(c.value == "You answer as **ada**." for c in ada.run().caption)


def test_the_naive_rules_tiny_p_value_is_shown_in_scientific_notation_not_as_zero(single_user):
    at = lessons_page().run()
    at.selectbox(key="ls_lesson").set_value("naive-chi-square").run()
    at.radio(key="ls_pred_naive-chi-square").set_value(LESSONS["naive-chi-square"].answer.choices[0]).run()
    at.button(key="ls_commit").click().run()
    at.button(key="ls_run").click().run()
    facts = next(m.value for m in at.markdown if "χ² p-value of the naive" in m.value)
    naive = facts.split("χ² p-value of the naive")[1].split("**")[1]
    assert naive == "< 1e-300" or "e-" in naive, facts
    assert "0.0000" not in facts
