"""Tree explorer: run the target live (or one round at a time) and look inside every round."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import streamlit as st  # noqa: E402

import explorer_run  # noqa: E402
import explorer_sidebar  # noqa: E402
import explorer_view  # noqa: E402
import room_ui  # noqa: E402
from explorer_state import ExplorerSession  # noqa: E402

shared_ui.page_header("Tree explorer", "One speculative round at a time: the draft tree, where the target's mass "
                      "flows (colour = P(v), red ring = exit mass X(v)), the accepted path (orange), the exit node "
                      "(red star) and the bonus token (green diamond).")

ss = st.session_state
session = room_ui.page_state(ExplorerSession)  # the same object after a page switch and after a reload
session.restore(ss)  # the settings this session chose here before it visited another page
settings, input_problems = explorer_sidebar.settings_sidebar(session.active_drafter)
session.keep(ss)

# ------------------------------------------------------------------ controls
c1, c2, c3, c4 = st.columns([1, 1, 1, 3])
blocked = bool(input_problems)  # a run never starts with a number other than the one shown
run_clicked = c1.button("▶ Run live", type="primary", key="ex_run", help="stream rounds to the end", disabled=blocked)
step_clicked = c2.button("⏭ Step one round", key="ex_step", disabled=blocked)
new_clicked = c3.button("⟲ New generation", key="ex_new", help="forget the rounds and start over")
if blocked:
    st.error("Run and Step wait for valid settings: " + "; ".join(input_problems) + ".")

with st.expander("Open a trace (replay without a model)", expanded=False):
    upload = st.file_uploader("trace file (.jsonl or .jsonl.gz)", type=["jsonl", "gz"], key="ex_upload")
    if upload is not None and session.takes_upload(upload.file_id):
        explorer_run.open_trace(session, upload.getvalue(), upload.name)
    folder = room_ui.space().folder if room_ui.in_room() else Path(  # a room: only this browser's own space
        st.text_input("or open a saved trace from a folder", value="traces", key="ex_open_folder"))
    saved = sorted(folder.glob("*.jsonl*")) if folder.is_dir() else []
    if room_ui.in_room():
        st.caption(room_ui.space_note())
    if saved:
        chosen = st.selectbox("saved traces", [p.name for p in saved], key="ex_open_pick")
        if st.button("Open", key="ex_open_btn"):
            explorer_run.open_trace(session, folder / chosen, chosen)

live_slot = st.empty()  # a live run's progress, tree and text
# everything below: every run first puts an empty element here, so during a live run the previous view (its tree
# included) is gone; the view is drawn into it once the rounds are in. The live run draws into another slot: an
# empty element and a block sent to one place back to back are merged into the block, which keeps the old tail.
body = st.empty()
if new_clicked:
    session.forget()
shown = session
if run_clicked or step_clicked:
    shown = explorer_run.run_or_step(session, settings, run_clicked, live_slot)
else:
    changed = session.shown_changes(settings)
    if changed:
        c4.warning("The rounds shown came from other settings: " + "; ".join(changed) + ". The next Run or Step "
                   "starts a new generation with the settings on screen.")

with body.container():
    explorer_view.show_view(shown, settings)
