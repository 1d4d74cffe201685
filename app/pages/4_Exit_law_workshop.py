"""Exit-law workshop: edit a small tree and its target probabilities by hand; no model needed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

import coupling_view  # noqa: E402
import figures  # noqa: E402
import inputs  # noqa: E402
import room_ui  # noqa: E402
from comparison_state import Made  # noqa: E402
from kept_widgets import within  # noqa: E402
from tevcore.config import DecodeConfig  # noqa: E402
from tevcore.studio import claims, workshop as studio_workshop  # noqa: E402
from tevcore.studio.coupling import coupling_presets  # noqa: E402
from tevcore.studio.workshop_tables import mixed_presets, workshop_presets, workshop_texts  # noqa: E402
from workshop_state import WorkshopSession, table_key  # noqa: E402


def computed(state: WorkshopSession, slot: str, key, work, refusal: str):
    """What `work(seat)` returns, computed once per `key` by the studio (in a queue turn) and kept in the state's
    `slot`; a ValueError is shown after `refusal` and ends the run."""
    made = getattr(state, slot)
    if made is None or made.key != key:
        try:
            with room_ui.seat() as asking:
                made = Made(key, {}, work(asking))
        except (ValueError, RuntimeError) as err:
            st.error(f"{refusal}: {err}")
            st.stop()
        setattr(state, slot, made)
    return made.value


def show_two_orders(state: WorkshopSession, found, table: str) -> None:
    """The mixed node of the table's p and q: both orders' acceptance over the sibling's draw, then one drawn
    sibling tried in both orders with the same random numbers, step by step (all from the studio's `two_orders`)."""
    seed_box, step_box = st.columns([1, 3])
    w = state.widgets
    seed = int(w.kept("ws_m_seed", seed_box.number_input("seed of the sibling's draw and the tries", 0, 2**31 - 1,
                                                         **w.args("ws_m_seed", 0, within(0, 2**31 - 1)))))
    if state.orders is None or state.orders.key != (table, seed):
        try:
            with room_ui.seat() as asking:
                state.orders = Made((table, seed), {}, studio_workshop.explain_orders(asking, found, seed))
        except ValueError as err:
            st.error(f"No mixed node here: {err}")
            return
    orders = state.orders.value
    m1, m2, m3 = st.columns(3)
    m1.metric("fixed first (the earlier order)", f"{orders.fixed_first:.4f}")
    m2.metric("siblings first (rrs)", f"{orders.siblings_first:.4f}")
    m3.metric("the design's ceiling p(a) + Σ min(p, q′)", f"{orders.ceiling:.4f}")
    st.caption(f"Acceptance at the node over the draw of the sibling, from the package's laws. The fixed guess a "
               f"is {orders.guess!r} (q's top-1); the sibling is drawn from q′ = q without it. Fixed first accepts "
               f"p(a) + Σ min(p, (1 − p(a)) q′): rejecting a shrinks the residual's room for the sibling. Siblings "
               f"first accepts p(a) + Σ min(p, q′): q′ never proposes a, so a keeps its whole mass for the last "
               f"try, where the residual's draw either lands on it (accept the fixed child) or gives the bonus.")
    st.markdown(f"**One round, step by step:** the sibling drawn is {orders.sibling!r}; both orders use the same "
                "random number for their first and second try.")
    step = w.kept("ws_m_step", step_box.slider("step", 0, 2, **w.args("ws_m_step", 0, within(0, 2)),
                                               help="0: the draw; 1: the first try; 2: the second"))
    for column, (name, tries) in zip(st.columns(2), orders.tries.items()):
        with column:
            st.markdown(f"**{name}**")
            rows = [{"try": i + 1, "token": t.token, "kind": "fixed guess" if t.fixed else "drawn sibling",
                     "divided by": f"{t.proposal:.4f}" + (" (point mass)" if t.fixed else " (q′ of its token)"),
                     "acceptance": f"{t.accept_prob:.4f}", "uniform": f"{t.uniform:.4f}",
                     "outcome": "—" if i >= step else ("not reached" if t.accepted is None else
                                                       "accepted" if t.accepted else "rejected")}
                    for i, t in enumerate(tries)]
            st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"ws_m_{name}")
            if step == 2:
                won = [t.token for t in tries if t.accepted]
                st.caption(f"moves on to {won[0]!r}" if won else "every try rejected: exit at the root, the bonus "
                           "drawn from the residual left")


shared_ui.page_header("Exit-law workshop", "A hand-made tree and the target's probabilities after each node "
                      "(or, in the coupling preset, the target's and the drafter's rows after one context). "
                      "Everything below is recomputed by the engine (tevcore.engine.flow.target_flow) as you edit.")
ss = st.session_state
state = room_ui.page_state(WorkshopSession)
w = state.widgets

st.markdown(
    "**The law in plain words.** The target's probability mass enters the tree at the root and flows down: "
    "node *v* receives *P(v)*, the chance that a sample from the target starts with the path to *v*. Of that, the "
    "share *m(v)* that continues into one of *v*'s children stays in the tree, and the rest, "
    "*X(v) = P(v)(1 − m(v))*, leaves the tree at *v*. An exact verifier that is optimal stops at *v* with probability exactly *X(v)*, "
    "whatever its mechanics, and then draws the bonus token from the target's choices at *v* that are not "
    "children of *v*. " + claims.bound_claim())

presets = workshop_presets()
couplings = coupling_presets()  # p and q on a few tokens: a sampled draw against a fixed guess
mixed = mixed_presets()  # p and q again: one fixed guess and one drawn sibling, tried in both orders
tables = {**presets, **couplings, **mixed}
names = list(tables)
preset = w.kept("ws_preset", st.selectbox("preset", names, **w.choice("ws_preset", names)))
coupled = preset in couplings or preset in mixed
if coupled:
    st.caption("One row per token after the context: **p** = the target's p(token), **q** = the drafter's "
               "q(token). What p or q leaves of 1 goes to '(other)'.")
else:
    st.caption("One row per token the target wants after a parent node: **in tree** rows are tree nodes (their "
               "**node** id can be another row's **parent**; 0 is the root), the other rows are tokens the tree is "
               "missing. **p** = p(token | parent). What a parent's rows leave of 1 goes to '(other)'.")
# Each preset keeps its edits while another is shown and across a page switch: an editor not on screen loses its
# state, so its last edited table is kept and is what its editor opens with when it comes back.
edits, bases, resets = state.edits, state.bases, state.resets
editor = f"ws_table_{preset}_{resets.get(preset, 0)}"
if state.shown != preset or preset not in bases or editor not in ss:
    bases[preset] = edits.get(preset, tables[preset])
    state.shown = preset
table = st.data_editor(
    bases[preset], num_rows="dynamic", hide_index=True, key=editor,
    column_config={
        "q": st.column_config.NumberColumn("q", step=0.01, format="%.3f"),
        "node": st.column_config.NumberColumn("node", min_value=1, step=1, help="id of a tree node"),
        "parent": st.column_config.NumberColumn("parent", min_value=0, step=1, required=True),
        "token": st.column_config.TextColumn("token", required=True),
        # no min/max: the editor would clamp 1.7 to 1 silently; workshop_tree refuses it with a message instead
        "p": st.column_config.NumberColumn("p", step=0.01, format="%.3f"),
        "in tree": st.column_config.CheckboxColumn("in tree", default=True),
    })
edits[preset] = pd.DataFrame(table)
if preset in edits and not edits[preset].equals(tables[preset]):
    if st.button("↺ reset this preset", key="ws_reset"):
        edits.pop(preset, None)
        bases.pop(preset, None)
        resets[preset] = resets.get(preset, 0) + 1
        st.rerun()
key = table_key(edits[preset])

if coupled:
    found = computed(state, "coupling", key, lambda asking: studio_workshop.explain_coupling(asking, edits[preset]),
                     "This table does not describe p and q")
    if preset in mixed:
        show_two_orders(state, found, key)
    else:
        coupling_view.show(state, found, key)
    st.stop()

lesson = computed(state, "lesson", key, lambda asking: studio_workshop.explain_tree(asking, edits[preset]),
                  "This table does not describe a valid tree")
ws, flow = lesson.table, lesson.flow
texts = workshop_texts(ws)
m1, m2, m3, m4 = st.columns(4)
m1.metric("tree nodes", ws.tree.size)
coverage = round(flow.coverage, 4)  # one rounded number for both cards: they always differ by exactly 1
m2.metric("coverage C", f"{coverage:.4f}")
m3.metric("1 + C", f"{1 + coverage:.4f}")
m4.metric("sum of X", f"{float(flow.exit_mass.sum()):.6f}")

left, right = st.columns([3, 2])
with left:
    st.plotly_chart(figures.tree_figure(ws.tree, flow, texts, title="the tree: colour = P(v), ring = X(v)",
                                        show_x_values=True), key="ws_tree")
with right:
    frame = pd.DataFrame({"node": ws.node_labels, "a": flow.edge_prob.numpy(), "P": flow.path_prob.numpy(),
                          "m": flow.child_mass.numpy(), "X": flow.exit_mass.numpy()})
    st.dataframe(frame, hide_index=True, key="ws_flow_table")
    st.plotly_chart(figures.flow_bars_figure(ws.node_labels, flow), key="ws_flow_bars")

law_col, bonus_col = st.columns(2)
with law_col:
    st.plotly_chart(figures.exit_law_figure(ws.node_labels, flow.exit_mass.numpy(), {}, top=len(ws.node_labels)),
                    key="ws_exit_law")
with bonus_col:
    nodes = list(range(ws.tree.num_nodes))
    node = w.kept("ws_bonus_node", st.selectbox("bonus law at exit node", nodes,
                                                format_func=lambda v: ws.node_labels[v],
                                                **w.choice("ws_bonus_node", nodes)))
    bonus = lesson.bonus[node].numpy()
    keep = np.nonzero(bonus > 0)[0]
    st.plotly_chart(figures.bonus_figure([figures.short(ws.vocab[i], 12) for i in keep], bonus[keep], {},
                                         ws.node_labels[node]),
                    key="ws_bonus_law")

# ------------------------------------------------------------------ two verifiers, step by step
st.subheader("Step by step: predraw-and-follow vs one-draw TEV")
st.caption(f"{claims.TEV_EXPANDED}; predraw-and-follow walks down one target draw per level.")
c1, c2 = st.columns([1, 3])
seed_value = w.kept("ws_seed", c1.number_input("seed of the draws", step=1,
                                               **w.args("ws_seed", DecodeConfig.default("seed"))))
seed_problem = inputs.range_problem("seed of the draws", seed_value, inputs.decode_range("seed"))
if seed_problem:
    st.error(f"Refused: {seed_problem}.")
    st.stop()
seed = int(seed_value)
walks = computed(state, "walks", (key, seed), lambda asking: studio_workshop.walk_tree(asking, lesson, seed),
                 "A verifier refused this tree")
walk, tev = walks.predraw, walks.tev
steps = len(walk.path) + 1  # start, one draw per node on the path (the last is the bonus)
step_key = f"ws_step_{preset}_{steps}"
last_step = max(steps - 1, 2)
step = w.kept(step_key, c2.slider("step", 0, last_step, **w.args(step_key, 0, within(0, last_step)),
                                  help="predraw needs one draw per accepted token plus the bonus; TEV always "
                                       "needs two"))

left, right = st.columns(2)
with left:
    k = min(step, steps - 1)
    if k == 0:
        caption = "start at the root; nothing drawn yet"
        fig = figures.tree_figure(ws.tree, flow, texts, path=[0], title="predraw-and-follow: start")
    elif k < len(walk.path):
        v, child = walk.path[k - 1], walk.path[k]
        caption = (f"draw {k}: at node {ws.node_labels[v]} the target draws {texts[child]!r}, a child "
                   f"→ follow it to node {ws.node_labels[child]}")
        fig = figures.tree_figure(ws.tree, flow, texts, path=walk.path[: k + 1], selected=child,
                                  title=f"predraw-and-follow: draw {k}")
    else:
        caption = (f"draw {k}: at node {ws.node_labels[walk.exit_node]} the target draws "
                   f"{ws.vocab[walk.bonus_token]!r}, not a child → exit here; it is the bonus. "
                   f"Block length {len(walk.path)}.")
        fig = figures.tree_figure(ws.tree, flow, texts, path=walk.path, exit_node=walk.exit_node,
                                  bonus_text=ws.vocab[walk.bonus_token], title=f"predraw-and-follow: draw {k} (done)")
    st.plotly_chart(fig, key="ws_walk_predraw")
    st.caption(caption)
with right:
    if step == 0:
        caption = "compute X(v) = P(v)(1 − m(v)) for every node at once (the rings)"
        fig = figures.tree_figure(ws.tree, flow, texts, path=[0], show_x_values=True, title="TEV: the exit law")
    elif step == 1:
        caption = f"one draw over X: exit at node {ws.node_labels[tev.exit_node]}; its path is accepted"
        fig = figures.tree_figure(ws.tree, flow, texts, path=tev.path, exit_node=tev.exit_node,
                                  title="TEV: draw 1, the exit node")
    else:
        caption = (f"one masked draw at the exit: bonus {ws.vocab[tev.bonus_token]!r}. "
                   f"Done in two draws; block length {len(tev.path)}.")
        fig = figures.tree_figure(ws.tree, flow, texts, path=tev.path, exit_node=tev.exit_node,
                                  bonus_text=ws.vocab[tev.bonus_token], title="TEV: draw 2, the bonus (done)")
    st.plotly_chart(fig, key="ws_walk_tev")
    st.caption(caption)
st.markdown("**Why they can end differently under one seed.** Both rules exit at v with probability X(v) and "
            "draw the bonus from the same masked row: they follow the same law. They use their random numbers "
            "differently: predraw spends one random number per level it walks down, TEV a single one to pick the "
            "exit node; both then draw the bonus. So the same seed, the same stream of random numbers, can send "
            "them to different nodes; only over many seeds do they exit at each node equally often (the Verifier "
            "comparison page counts 100,000 draws of each). Change the seed to see other draws.")
