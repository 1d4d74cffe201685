"""The explorer's rounds so far (streamlit): which round is shown, that round up close (`explorer_round`), the
rounds together, and saving them as a trace.

The round slider's key (`ex_round`) is bound to the session here only: a new
round moves it to the latest, and the session keeps the round on screen for
the verifier comparison.
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


def save_rounds(records, meta: dict) -> None:
    st.subheader("Save these rounds")
    meta = dict(meta or {})
    s1, s2 = st.columns(2)
    with s1:
        # serialised only when clicked (a callable), so a render after each round stays cheap
        st.download_button("⬇ Download trace (.jsonl)", data=lambda: appdata.trace_bytes(records, meta),
                           file_name=f"trace-{time.strftime('%Y%m%d-%H%M%S')}.jsonl", mime="application/json",
                           key="ex_download")
    with s2:
        out_folder = room_ui.space().folder if room_ui.in_room() else st.text_input(
            "save to folder", value="traces", key="ex_save_folder")
        if room_ui.in_room():
            st.caption(room_ui.space_note())
        if st.button("💾 Save trace", key="ex_save"):
            from tevcore.engine.records import write_trace

            try:
                folder = Path(out_folder)
                folder.mkdir(parents=True, exist_ok=True)
                path = write_trace(folder / f"trace-{time.strftime('%Y%m%d-%H%M%S')}.jsonl.gz", records, meta)
            except OSError as err:
                st.error(f"Could not save: {err}")
            else:
                st.success(f"saved {path}")


def _chosen_round(session: ExplorerSession) -> int:
    """The round slider (moved to the latest round when new rounds arrived) read into the session."""
    records = session.records
    latest = session.new_round_to_follow()
    if latest is not None:
        st.session_state[ROUND_KEY] = latest
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
        st.info(appdata.trace_settings_text(session.meta, records))
    index = _chosen_round(session)
    try:
        explorer_round.show_round(session, records[index], index, session.seed_used(settings))
        show_across_rounds(records)
    except Exception as err:  # a broken view never loses the rounds: say what failed, reset the view only
        st.error(f"This view failed ({type(err).__name__}: {err}). Every round is kept "
                 f"({figures.plural(len(records), 'round')}); the view (round, chosen node) was reset, so the next "
                 "action draws it afresh.")
        session.reset_view()
    save_rounds(records, session.meta)
