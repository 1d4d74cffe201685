"""What the explorer runs (streamlit): a live generation started and its rounds streamed, a trace opened for
replay (the studio's capped reader and trace service), and a live round re-scored for its exact rows. Model work
waits its turn in the server's compute queue (`room_ui.compute_turn`, `room_ui.seat`); the session object
(`explorer_state.ExplorerSession`) keeps what comes back.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import streamlit as st
import torch

import appdata
import figures
import room_ui
import shared_ui
from explorer_state import ExplorerSession, ExplorerSettings, live_meta
from tevcore.studio import traces as studio_traces

FAN_SHOWN = 6  # children the node-link tree draws per node before folding the rest of a fan into "+N more"


def start_generation(session: ExplorerSession, settings: ExplorerSettings) -> bool:
    """A fresh generator for `settings` in the session; False (with an error shown) if the inputs are invalid."""
    if not settings.prompt.strip():
        st.error("The prompt is empty: pick an item or type a prompt.")
        return False
    try:  # refused here, before any model loads (a bad builder, a trimmed sampled tree, a cap)
        config = room_ui.guarded.check_decode(room_ui.limits(), settings.config())
    except ValueError as err:
        st.error(f"Invalid settings: {err}")
        return False
    from tevcore.decoding.autobudget import trim_costs
    from tevcore.decoding.loop import prompt_ids, rounds  # loads transformers: only when a generation starts

    spec = settings.target
    if not spec:
        st.error("The target field is empty: type 'default', a hub id, a model folder or a .gguf path.")
        return False
    try:
        target = shared_ui.get_target(spec)
        proposer, note = shared_ui.proposer_with_fallback(settings.proposer, spec) if config.budget > 0 \
            else (None, None)
        ids = prompt_ids(target, settings.prompt, chat=settings.chat)
        config = replace(config, tree_costs=trim_costs(target, [config.budget], config.trim)[config.budget])
    except Exception as err:  # a missing model file, a bad drafter folder, a prompt too long ...
        st.error(f"Could not start ({type(err).__name__}): {err}")
        return False
    if note:
        st.warning(note)
    meta = live_meta(target.name, settings.prompt, getattr(proposer, "name", None), config)
    session.start_live(rounds(target, proposer, ids, config), settings, ids, spec, meta, note, time.perf_counter())
    return True


def advance(session: ExplorerSession, limit: int | None, max_new_tokens: int, live_slot=None,
            still_here=lambda: None) -> None:
    """Pull up to `limit` rounds (None = to the end) from the session's generator, streaming them into `live_slot`.

    Each round's tree and the text so far are drawn as the round arrives; the slot is emptied at the end.
    `still_here()` is called before each round: it raises once the page's tab is closed, so the rounds stop there.
    """
    pulled = 0
    live_area = live_slot.container() if live_slot is not None else None
    progress = live_area.progress(0.0, text="decoding…") if live_area is not None else None
    tree_box = live_area.empty() if live_area is not None else None
    text_box = live_area.empty() if live_area is not None else None
    while limit is None or pulled < limit:
        still_here()
        try:
            record = next(session.generation)
        except StopIteration:
            session.done = True
            break
        except Exception as err:  # shown, never a traceback: the generation ends here
            st.error(f"The round failed ({type(err).__name__}): {err}")
            session.done = True
            break
        session.add(record)
        pulled += 1
        if progress is not None:
            made = session.made_tokens
            progress.progress(min(1.0, made / max_new_tokens),
                              text=f"round {record.index}: {made} tokens, block length {record.emitted}")
            tree_box.plotly_chart(figures.record_tree_figure(record, fan=FAN_SHOWN),
                                  key=f"ex_live_tree_{record.index}")
            text_box.markdown(figures.text_by_round_html(session.records), unsafe_allow_html=True)
    if live_slot is not None:
        live_slot.empty()


def run_or_step(session: ExplorerSession, settings: ExplorerSettings, run: bool, live_slot) -> None:
    """Run (to the end, streamed into `live_slot`) or Step (one round), starting over when the settings changed;
    the decode waits its turn in the server's compute queue."""
    with room_ui.compute_turn() as still_here:  # the place in line shows while waiting
        if not session.needs_new_generation(settings) or start_generation(session, settings):
            advance(session, None if run else 1, settings.max_new_tokens, live_slot if run else None, still_here)


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
        with room_ui.compute_turn():
            target = shared_ui.get_target(session.target_spec)
            return appdata.rescored_logits(target, session.prompt_ids, session.records, index)

    return session.rows_for(index, rescore)
