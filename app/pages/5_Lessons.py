"""Lessons: predict, run, check. Each lesson shows a small setting and asks one question; the participant commits a
prediction, then Run computes the truth with the package's own functions, then the page checks the prediction and
explains the figure. In a room the host sees every participant's answers, live.

The lessons, their truths and the progress object are the package's (`tevcore.studio`); this page only collects
input and renders.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

import figures  # noqa: E402
import room_ui  # noqa: E402
from tevcore.room.answers import AnswerBoard, anonymous_name  # noqa: E402
from tevcore.room.queue import Replaced  # noqa: E402
from tevcore.studio.lesson_service import LessonRequest, LessonSession, ProgressError, TruthCache  # noqa: E402
from tevcore.studio.lessons import LESSONS, ChoiceAnswer, Truth  # noqa: E402

shared_ui.page_header("Lessons", "Predict, run, check: commit a prediction before anything is revealed, then let "
                      "the package compute the truth on the lesson's setting and see why.")
ss = st.session_state
ROOM = "room"  # a server hosts one room: its answers and pace live under this key of the answer board
SAVED = "lessons.json"  # the progress file in a participant's room space
KEYS = list(LESSONS)


@st.cache_resource(show_spinner=False)
def truths() -> TruthCache:
    """The server's one cache of truths: a lesson's truth is computed once for everybody."""
    return TruthCache(room_ui.compute_queue())


@st.cache_resource(show_spinner=False)
def answer_board() -> AnswerBoard:
    return AnswerBoard()


def anonymous_id() -> str:
    return anonymous_name(room_ui.participant())


def progress() -> LessonSession:
    """This participant's progress: kept in the session (a page switch keeps it) and, in a room, in their space."""
    if "ls_session" not in ss:
        found = LessonSession()
        if room_ui.in_room():
            saved = room_ui.space().path(SAVED)
            if saved.is_file():
                try:
                    found = LessonSession.from_json(saved.read_text())
                except ValueError:
                    st.warning("Your saved lesson progress could not be read; starting afresh.")
        ss.ls_session = found
    return ss.ls_session


def save(session: LessonSession) -> None:
    if room_ui.in_room():
        room_ui.space().path(SAVED).write_text(session.to_json())


def who(session: LessonSession) -> str:
    return session.name or anonymous_id()


def shown(value) -> str:
    return figures.number_text(value) if isinstance(value, float) else str(value)


def fact_text(label: str, value) -> str:
    if isinstance(value, float) and "p-value" in label:
        return figures.p_value_text(value)
    return shown(value)


session = progress()


# ------------------------------------------------------------------ the host's view (room only)
PACES = ["each at their own pace", "together: I open the lessons one by one"]


def set_pace() -> None:
    """The host changed the pace (a callback: only a change by this host writes it, never a stale radio)."""
    answer_board().set_pace(ROOM, ss.ls_pace == PACES[1])


def host_view() -> None:
    board = answer_board()
    pace = board.pace(ROOM)
    ss.ls_pace = PACES[int(pace.together)]  # the board's pace, whichever host set it last
    st.radio("pace", PACES, key="ls_pace", horizontal=True, on_change=set_pace)
    if pace.together:
        left, right = st.columns([1, 3])
        left.button("open the next lesson for everyone", key="ls_open_next", disabled=pace.opened >= len(KEYS),
                    on_click=lambda: board.open_next(ROOM, len(KEYS)))
        right.caption(f"open: {figures.plural(pace.opened, 'lesson')} of {len(KEYS)} "
                      f"(up to “{LESSONS[KEYS[pace.opened - 1]].title}”)")
    st.download_button("⬇ the room's answers (CSV, anonymous)", board.csv(ROOM, KEYS),
                       file_name="lesson-answers.csv", mime="text/csv", key="ls_export")
    room_answers()


@st.fragment(run_every=2)
def room_answers() -> None:
    """Per lesson: how many answered and the share right (a table), then each answered lesson's predictions
    against the truth; live."""
    board = answer_board()
    answers = {key: board.answers(ROOM, key) for key in KEYS}
    st.dataframe(pd.DataFrame({
        "lesson": [f"{i + 1}. {LESSONS[k].title}" for i, k in enumerate(KEYS)],
        "answered": [len(answers[k]) for k in KEYS],
        "right": [f"{sum(a.correct for a in answers[k]) / len(answers[k]):.0%}" if answers[k] else "–"
                  for k in KEYS]}),
        hide_index=True, key="ls_room_table", column_config={"lesson": st.column_config.TextColumn(width="large")})
    for key in [k for k in KEYS if answers[k]]:
        found, truth = LESSONS[key], truths().truth(key, room_ui.participant())  # computed: someone checked it
        choices = found.answer.choices if isinstance(found.answer, ChoiceAnswer) else None
        st.plotly_chart(figures.predictions_figure(
            [a.prediction for a in answers[key]], truth.value, choices, getattr(found.answer, "tolerance", 0.0),
            title=f"predictions for “{found.title}”"), key=f"ls_room_{key}")
        st.caption(f"{found.question} The truth is {shown(truth.value)}.")


def host_gate() -> bool:
    """Whether this session is the host's; draws the secret box for the others."""
    return room_ui.host_secret_box("host secret", "ls_host_secret", help="the room's answers are the host's to see")


# ------------------------------------------------------------------ a participant's lesson
def commit(key: str) -> None:
    try:
        session.commit(LessonRequest.of(key, ss.get(f"ls_pred_{key}")))
    except ValueError as err:
        ss.ls_said = f"Refused: {err}"
        return
    save(session)


def retry(key: str) -> None:
    session.retry(key)
    save(session)


def draw_truth(truth: Truth) -> None:
    if truth.tree is not None and truth.flow is not None:
        left, right = st.columns(2)
        left.plotly_chart(figures.lesson_bars_figure(truth.bars), key="ls_bars")
        right.plotly_chart(figures.tree_figure(
            truth.tree.tree, truth.flow, truth.tree.texts, path=list(truth.path), exit_node=truth.exit_node,
            bonus_text=truth.bonus_text, show_x_values=True, title="the tree: colour = P(v), ring = X(v)"),
            key="ls_tree")
    else:
        st.plotly_chart(figures.lesson_bars_figure(truth.bars), key="ls_bars")


def lesson_view(key: str) -> None:
    found = LESSONS[key]
    state = session.of(key)
    st.subheader(found.title)
    st.markdown(found.setting_text)
    st.dataframe(pd.DataFrame(found.setting().rows()), hide_index=True, key=f"ls_setting_{key}")
    st.markdown(f"**Question.** {found.question}")
    said = ss.pop("ls_said", None)
    if said:
        st.error(said)
    if state.prediction is None:
        if isinstance(found.answer, ChoiceAnswer):
            st.radio("your prediction", found.answer.choices, index=None, key=f"ls_pred_{key}")
        else:
            answer = found.answer
            st.number_input("your prediction", min_value=answer.low, max_value=answer.high, value=None,
                            step=answer.step, format="%.0f" if answer.step >= 1 else "%.3f", key=f"ls_pred_{key}")
        st.button("🔒 Commit my prediction", key="ls_commit", on_click=commit, args=(key,), type="primary")
        st.caption("Nothing is revealed before you commit; a retry unlocks the prediction afterwards.")
        return
    st.info(f"Your prediction (locked): **{shown(state.prediction)}**")
    if not state.revealed:
        if not st.button("▶ Run", key="ls_run", type="primary"):
            st.caption("Press Run: the package computes the truth on this setting.")
            return
        box = st.empty()
        try:
            check = truths().check(session.request(key), room_ui.participant(),
                                   on_wait=lambda place: box.info(place.text()))
        except Replaced:
            box.info("This request was replaced by your newer one.")
            st.stop()
        except ProgressError as err:
            st.error(f"Refused: {err}")
            st.stop()
        state = session.reveal(check)
        save(session)
        if room_ui.in_room():
            answer_board().record(ROOM, who(session), key, check.prediction, check.truth.value, check.correct,
                                  state.attempts)
        st.rerun()  # drawn again as revealed: the progress marks updated, no Run button left
    truth = truths().truth(key, room_ui.participant())
    if state.correct:
        st.success(f"✓ Right. The truth is {shown(truth.value)}; you said {shown(state.prediction)}.")
    else:
        tolerance = getattr(found.answer, "tolerance", None)
        within = f" (within ±{tolerance:g})" if tolerance else ""
        st.warning(f"✗ Not this time. The truth is {shown(truth.value)}{within}; you said {shown(state.prediction)}.")
    st.markdown(f"**Why.** {found.explanation}")
    st.markdown("\n".join(f"- {what}: **{fact_text(what, value)}**" for what, value in truth.facts))  # wraps
    draw_truth(truth)
    st.button("↺ Retry this lesson", key="ls_retry", on_click=retry, args=(key,))


def available() -> list[str]:
    """The lessons this participant may open: all, or in a room going together the ones the host opened."""
    if not room_ui.in_room():
        return KEYS
    pace = answer_board().pace(ROOM)
    return KEYS[: pace.opened] if pace.together else KEYS


@st.fragment(run_every=3)
def follow_the_host(opened: int) -> None:
    """In a room going together: when the host opens another lesson, draw the page again to offer it."""
    if len(available()) != opened:
        st.rerun(scope="app")


def mark(key: str) -> str:
    state = session.progress.get(key)
    if state is None or state.prediction is None:
        return "·"
    return "✓" if state.correct else ("✗" if state.revealed else "🔒")


def participant_view() -> None:
    if room_ui.in_room():
        name = st.text_input("your name in the room (optional: anonymous otherwise)", value=session.name,
                             max_chars=24, key="ls_name", help="the host sees your answers under it")
        if name.strip() != session.name:
            before = who(session)
            try:
                answer_board().rename(ROOM, room_ui.participant(), before, name.strip() or anonymous_id())
            except ValueError as err:
                st.error(f"Refused: {err}")
            else:
                session.name = name.strip()
                save(session)
        st.caption(f"You answer as **{who(session)}**.")
    keys = available()
    if session.current not in keys:
        session.current = keys[-1]
    chosen = st.selectbox("lesson", keys, index=keys.index(session.current), key="ls_lesson",
                          format_func=lambda k: f"{KEYS.index(k) + 1}. {LESSONS[k].title}")
    if chosen != session.current:
        session.current = chosen
        save(session)
    st.caption(" ".join(f"{i + 1} {mark(k)}" for i, k in enumerate(keys)) + f" — {session.solved()} of "
               f"{figures.plural(len(KEYS), 'lesson')} right so far "
               "(✓ right, ✗ not yet, 🔒 committed, · not started)")
    if room_ui.in_room() and answer_board().pace(ROOM).together:
        follow_the_host(len(keys))
        if len(keys) < len(KEYS):
            st.caption("The host opens the next lesson for the room.")
    lesson_view(chosen)


if room_ui.in_room():
    mine, hosts = st.tabs(["Lessons", "Host's view"])
    with mine:
        participant_view()
    with hosts:
        if host_gate():
            host_view()
else:
    participant_view()
