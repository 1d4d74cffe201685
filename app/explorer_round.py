"""The explorer's chosen round up close (streamlit): the tree (a click selects a node or opens a folded fan), the
round's metrics, the chosen node's next-token law, its nodes table, and a sampled round's draws and trail.

What was chosen on each round lives in the session's `RoundView`; the chart
and node-box widget keys are this module's own.
"""

from __future__ import annotations

import streamlit as st

import explorer_clicks
import explorer_run
import explorer_sampled
import figures
from explorer_state import ExplorerSession

FAN_SHOWN = explorer_run.FAN_SHOWN


def _pick_node(session: ExplorerSession, index: int, key: str, num_nodes: int) -> None:
    """The node box changed: remember its choice for this round (typed, checked)."""
    session.view.pick(index, st.session_state.get(key), num_nodes)


def _tree_tabs(record, index: int, node: int, opened: set[int]) -> None:
    """The node-link tree (its fans folded past FAN_SHOWN children) and the icicle of where the mass leaves."""
    link_tab, icicle_tab = st.tabs(["node-link tree", "icicle: where the mass leaves"])
    with link_tab:
        widest = max((len(kids) for kids in record.tree.children()), default=0)
        fan = None
        if widest > FAN_SHOWN + 1:
            f1, f2 = st.columns([3, 1])
            fan = f1.slider("children drawn per node (the rest of a fan folds into one '+N more' node)", 1,
                            widest, FAN_SHOWN, key="ex_fan",
                            help="the likeliest children by P(v) stay; the accepted path, the exit and the "
                                 "chosen node always do. Click a '+N more' node to open its fan.")
            if opened and f2.button("fold the opened fans", key=f"ex_fold_{index}"):
                opened.clear()
        fig = figures.record_tree_figure(record, selected=node, fan=fan, opened=sorted(opened))
        st.plotly_chart(fig, key=f"ex_tree_chart_{index}", on_select="rerun", selection_mode="points",
                        config={"scrollZoom": True})
    with icicle_tab:
        st.plotly_chart(figures.record_icicle_figure(record), key="ex_icicle")
        st.caption("Each box is as wide as P(v); its children split it by their a, so the empty part under a "
                   "box is the mass X(v) that leaves the tree there. Orange outline: the accepted path; red "
                   "outline and ★: the exit node. Click a box to zoom into its subtree.")


def _metrics(record) -> None:
    """1 + C, the block, the tree's size and depth, the verdict, and whether trim kept the whole tree."""
    m1, m2, m3, m4 = st.columns(4)  # short values only: a metric card truncates long ones; no deltas (no change)
    m1.metric("1 + C", f"{record.expected_length:.2f}", help="expected block length of this tree")
    m2.metric("block length", record.emitted, help="tokens this round emitted: depth(exit) + 1")
    m3.metric("tree nodes", record.tree.size, help="draft nodes, the root not counted (what the budget counts)")
    m4.metric("depth", record.tree.max_depth)
    st.markdown(f"**verifier** {record.verifier} · **exit node** {record.exit_node} · **bonus** "
                f"`{record.bonus_text!r}` · **emitted** `{record.emitted_text!r}`")
    if record.trimmed:
        st.caption(f"✂ trimmed: the target scored the first {record.tree.size} of the {record.drafted_size} "
                   f"nodes drafted this round (trim auto keeps the prefix with the most forecast tokens per "
                   f"forward cost); the tree, 1 + C and the metrics above are those of the scored prefix.")
    elif record.drafted_size is not None:
        st.caption(f"trim auto kept all {record.drafted_size} drafted nodes this round.")


def show_round(session: ExplorerSession, record, index: int, seed: int) -> None:
    """Round `index` up close; `seed` is the one its rounds were verified with (a fresh trail draws from it)."""
    num_nodes = record.tree.num_nodes
    session.view.take_click(index, explorer_clicks.clicked(st.session_state.get(f"ex_tree_chart_{index}")),
                            num_nodes)  # a selection belongs to the round it was made on
    node = session.view.node(index, num_nodes, record.exit_node if record.exit_node is not None else 0)
    node_key = f"ex_node_{index}"
    st.session_state[node_key] = node  # set before the widget is drawn

    left, right = st.columns([3, 2])
    with left:
        _tree_tabs(record, index, node, session.view.fans(index))
    with right:
        _metrics(record)
        texts = record.token_texts
        st.selectbox("node", list(range(num_nodes)), key=node_key, on_change=_pick_node,
                     args=(session, index, node_key, num_nodes),
                     format_func=lambda v: f"{figures.node_name(v, texts[v])} (depth {int(record.tree.depths[v])})",
                     help="or click a node in the tree")
        drawn = figures.node_draws_text(record.tree, node)
        if drawn:
            st.caption(f"node {node}: {drawn}")
        rows = figures.node_distribution(record, node)
        st.plotly_chart(figures.next_token_figure(rows, f"p(.|node {node} {texts[node]!r}): tree children, "
                                                        "missing tokens, rest"), key="ex_node_chart")
        st.plotly_chart(figures.timings_figure(record), key="ex_timings")

    with st.expander("nodes of this round (table)", expanded=False):
        st.dataframe(figures.node_table(record), hide_index=True, key="ex_table")
    explorer_sampled.show_draws_and_trail(record, index, lambda i: explorer_run.round_rows(session, i)[0],
                                          session.is_live, session.has_rows(index), seed)
