"""The explorer's rounds so far (streamlit): which round is shown, that round up close (`explorer_round`), the
rounds together, and saving them as a trace.

The round slider's key (`ex_round`) is bound to the session here only: a new
round moves it to the latest, the session keeps the round on screen (for the
verifier comparison, and for this page after a page switch or a reload, when
streamlit has forgotten the slider). Save writes in its button's callback,
before the page runs, so the page's list of saved traces already holds the
new one.
"""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

import appdata
import explorer_round
import explorer_sampled
import figures
import room_ui
from explorer_state import ExplorerSession, ExplorerSettings
from tevcore.studio import traces as studio_traces

ROUND_KEY = "ex_round"  # the round slider


def show_across_rounds(records) -> None:
    st.subheader("Across rounds")
    st.markdown(figures.text_by_round_html(records), unsafe_allow_html=True)
    a1, a2, a3 = st.columns(3)
    a1.plotly_chart(figures.emitted_figure(records), key="ex_emitted")
    a2.plotly_chart(figures.exit_depth_figure(records), key="ex_exit_depth")
    a3.plotly_chart(figures.speed_figure(records), key="ex_speed")
    for note in dict.fromkeys(appdata.over_draws_note(r.verifier, r.tree, r.temperature) for r in records
                              if r.verifier):
        if note:
            st.caption(f"Why a block can be longer than 1 + C: {note}")
    explorer_sampled.show_siblings(records)


def _save(session: ExplorerSession, folder: Path) -> None:
    """The Save button's callback: the rounds written as a new trace file in `folder`, and what happened kept in
    the session for the page to say."""
    try:
        session.saved = f"saved {studio_traces.save_trace(folder, session.records, session.meta)}"
    except OSError as err:
        session.saved = f"Could not save: {err}"


def save_rounds(session: ExplorerSession) -> None:
    st.subheader("Save these rounds")
    records, meta = session.records, dict(session.meta or {})
    s1, s2 = st.columns(2)
    with s1:
        # serialised only when clicked (a callable), so a render after each round stays cheap
        st.download_button("⬇ Download trace (.jsonl)", data=lambda: studio_traces.trace_bytes(records, meta),
                           file_name=f"trace-{time.strftime('%Y%m%d-%H%M%S')}.jsonl", mime="application/json",
                           key="ex_download")
    with s2:
        out_folder = room_ui.space().folder if room_ui.in_room() else st.text_input(
            "save to folder", value="traces", key="ex_save_folder")
        if room_ui.in_room():
            st.caption(room_ui.space_note())
        st.button("💾 Save trace", key="ex_save", on_click=_save, args=(session, Path(out_folder)))
        said, session.saved = session.saved, None  # said once, on the run the click made
        if said is not None:
            (st.error if said.startswith("Could not") else st.success)(said)


def _chosen_round(session: ExplorerSession) -> int:
    """The round slider (moved to the latest round when new rounds arrived) read into the session."""
    records = session.records
    latest = session.new_round_to_follow()
    if latest is not None:
        st.session_state[ROUND_KEY] = latest
    elif ROUND_KEY not in st.session_state:  # back from another page, or a reload: the round that was on screen
        st.session_state[ROUND_KEY] = min(session.selected_round, len(records) - 1)
    if len(records) > 1:
        st.slider("round", 0, len(records) - 1, key=ROUND_KEY)
    return session.select(st.session_state.get(ROUND_KEY, len(records) - 1))


def show_view(session: ExplorerSession, settings: ExplorerSettings) -> None:
    """The rounds so far: the chosen round up close, the rounds together, saving."""
    records = session.records
    if not records:
        st.info("Press **Run live** to stream a generation, **Step one round** to go one round at a time, "
                "or open a trace. The first run loads the target model (a few seconds).")
        return
    if session.proposer_note:
        st.caption(session.proposer_note)
    st.caption(f"source: {session.source} · drafter: {records[-1].proposer} · "
               f"{figures.plural(len(records), 'round')} · "
               f"{'finished' if session.done else 'in progress (Step or Run for more)'}")
    if session.is_trace:
        st.info(studio_traces.trace_settings_text(session.meta, records))
    index = _chosen_round(session)
    try:
        explorer_round.show_round(session, records[index], index, session.seed_used(settings))
        show_across_rounds(records)
    except Exception as err:  # a broken view never loses the rounds: say what failed, reset the view only
        st.error(f"This view failed ({type(err).__name__}: {err}). Every round is kept "
                 f"({figures.plural(len(records), 'round')}); the view (round, chosen node) was reset, so the next "
                 "action draws it afresh.")
        session.reset_view()
    save_rounds(session)
