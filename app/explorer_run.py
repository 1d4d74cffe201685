"""What the explorer asks of its services (streamlit): a live generation started and its rounds streamed
(`tevcore.studio.explorer.decode`), a trace opened for replay (the studio's capped reader and trace service), and
a live round re-scored for its exact rows (`tevcore.studio.explorer.rescore_round`). Each service takes this
participant's seat (`room_ui.seat`): the server's caps, checked before any wait, and its turn in the compute queue;
the state object (`explorer_state.ExplorerSession`) keeps what comes back.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import streamlit as st
import torch

import figures
import room_ui
import shared_ui
from explorer_state import ExplorerSession, ExplorerSettings
from tevcore.studio import explorer as studio_explorer
from tevcore.studio import traces as studio_traces

FAN_SHOWN = 6  # children the node-link tree draws per node before folding the rest of a fan into "+N more"


class _LiveView:
    """A live run's progress bar, latest tree and text so far, drawn into one slot as each round arrives."""

    def __init__(self, slot, max_new_tokens: int) -> None:
        area = slot.container()
        self.max_new_tokens = max_new_tokens
        self.progress = area.progress(0.0, text="decoding…")
        self.tree_box, self.text_box = area.empty(), area.empty()

    def show(self, shown: ExplorerSession, record) -> None:
        """Round `record` has arrived; `shown` holds the run's rounds so far."""
        made = shown.made_tokens
        self.progress.progress(min(1.0, made / self.max_new_tokens),
                               text=f"round {record.index}: {made} tokens, block length {record.emitted}")
        self.tree_box.plotly_chart(figures.record_tree_figure(record, fan=FAN_SHOWN),
                                   key=f"ex_live_tree_{record.index}")
        self.text_box.markdown(figures.text_by_round_html(shown.records), unsafe_allow_html=True)


def _copy_of(session: ExplorerSession) -> ExplorerSession:
    """A copy whose list of rounds is its own (what a tab draws of its run, whatever another tab of the browser
    does to the shared session meanwhile); its view is the session's (`RoundView`)."""
    shown = copy.copy(session)
    shown.records = list(session.records)
    return shown


def run_or_step(session: ExplorerSession, settings: ExplorerSettings, run: bool, live_slot) -> ExplorerSession:
    """Run (to the end, streamed into `live_slot`) or Step (one round), starting over when the settings changed;
    the decode waits its turn in the server's compute queue. A refusal or a failure is said in one line.

    Returns what to draw: `session` when no generation ran, else a copy holding this run's generation and its
    rounds. The browser's tabs share `session`, and another tab's new generation can replace its rounds at any time
    once this run's turn ends (even while this page draws), so the page draws the copy; while the generation is
    still the session's, the copy shares its view, so a round chosen on it stays chosen. When the other tab's
    generation has already replaced this one, the page says so above the rounds."""
    try:
        request = settings.request()
    except ValueError as err:
        st.error(f"Invalid settings: {err}")
        return session
    fresh = session.needs_new_generation(settings)
    ours = {"generation": None if fresh else session.generation, "shown": _copy_of(session)}
    live = _LiveView(live_slot, settings.max_new_tokens) if run else None

    def started(generation) -> None:
        session.start_live(generation, settings, time.perf_counter())
        ours["generation"], ours["shown"] = generation, _copy_of(session)

    def kept(record) -> None:
        ours["shown"].records.append(record)  # this run's rounds, whatever another tab does to the shared session
        session.add(record, ours["generation"])  # and the session's, while it holds this generation
        if live is not None:
            live.show(ours["shown"], record)

    try:
        with room_ui.seat() as asking:
            found = studio_explorer.decode(
                asking, shared_ui.loaders(), request, ours["generation"], None if run else 1, on_start=started,
                on_round=kept)
    except ValueError as err:  # refused by the caps, before any wait
        st.error(f"Invalid settings: {err}")
        return session
    finally:
        live_slot.empty()
    if found.started is not None and found.started.drafter_note:
        st.warning(found.started.drafter_note)
    if found.failure:
        st.error(found.failure)
    if ours["generation"] is None:  # no generation ran (its start failed)
        return session
    shown = ours["shown"]
    shown.done = shown.done or found.finished
    if not session.finish(ours["generation"], found.finished):
        live_slot.info("Another tab of this browser has started a new generation since: this page shows the rounds "
                       "this run made; your next action here shows the new one.")  # above the rounds
    return shown


def open_trace(session: ExplorerSession, source: bytes | Path, name: str) -> None:
    """Replay a trace (uploaded bytes or a file): its rounds replace the session's, or an error is shown."""
    try:
        upload = room_ui.read_upload(source, name) if isinstance(source, bytes) else room_ui.read_file(source, name)
        with room_ui.seat() as asking:
            trace = studio_traces.open_trace(asking, upload)
    except (ValueError, OSError) as err:
        st.error(f"Could not open {name}: {err}")
        return
    session.replay(trace.rounds, trace.meta, name)


def round_rows(session: ExplorerSession, index: int) -> tuple[torch.Tensor, float | None]:
    """Live round `index`'s node logits (and their drift from the recorded X): kept, else re-scored once by the
    target, waiting its turn in the compute queue like every model computation. A failure is a ValueError."""
    def rescore():
        with room_ui.seat() as asking:
            return studio_explorer.rescore_round(asking, shared_ui.loaders(), session.target_spec,
                                                 session.prompt_ids, session.records, index)

    return session.rows_for(index, rescore)
