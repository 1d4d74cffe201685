"""The explorer's tree choice and sampled-tree parts: the builder and the verifiers it admits, a round's draws
and its rrs or block trail, and the sibling diagnostics of the rounds so far.

The pairing rule is the engine's `check_pairing`, the trail the engine's
`rrs_trail` or `block_trail` (through `appdata.round_trail`), the diagnostics `lab.siblings`'
(through `appdata.siblings_frames`); this module only lays them out.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st
import torch

import appdata
import figures
from tevcore.engine.builders import BUILDER_NAMES, MIXED_BUILDER_NAMES, SAMPLED_BUILDER_NAMES, get_builder
from tevcore.verify.verifiers import SAMPLED_VERIFIERS, VERIFIERS, check_pairing, verifier_label

# round index -> its node logits (a ValueError says why a round has none)
LogitsFor = Callable[[int], torch.Tensor]
WIDTH_PATTERN = next(name for name in BUILDER_NAMES if name.startswith("width:"))  # "width:W1,W2,..."
EXAMPLE_WIDTHS = "4,2,2,1"  # what the widths box opens with when the fixed-width builder is chosen
EXAMPLE_DRAWS = "3,2,1"  # what the draw-counts box opens with when a sampled builder is chosen


def builder_problem(builder: str) -> str | None:
    """The engine's one-line refusal of a builder name (its draw counts or widths), or None."""
    try:
        get_builder(builder)
    except ValueError as err:
        return str(err)
    return None


def verifier_options(builder: str) -> tuple[list[str], dict[str, str]]:
    """The verifiers offered with `builder`: every rule `check_pairing` admits (those exact on any tree, the
    proposal-ratio rules on sampled and mixed trees, the foil except on mixed trees); and, for each one it
    refuses, the engine's one-line reason."""
    offered, refused = [], {}
    for name in [*VERIFIERS, *SAMPLED_VERIFIERS]:
        try:
            check_pairing(name, builder)
        except ValueError as err:
            refused[name] = str(err)
        else:
            offered.append(name)
    return offered, refused


def tree_choice() -> tuple[str, str]:
    """The sidebar's builder (a shape's widths or draw counts in a text box, checked by the engine's parser) and
    the verifier among those the builder admits; returns the builder name and the verifier."""
    builder = st.selectbox("builder", BUILDER_NAMES + SAMPLED_BUILDER_NAMES + MIXED_BUILDER_NAMES, key="ex_builder",
                           help="best_first = DDTree heap; chain = top-1 path; width:W1,W2,... = fixed widths; "
                                "sampled:K1,K2,... = K draws per node from the drafter's q at each depth (i.i.d.; "
                                "sampled-wor without replacement); mixed:K1,K2,... = each node's top-1 child of q "
                                "fixed and K - 1 siblings drawn from q without it (mixed-wor without replacement)")
    if builder == WIDTH_PATTERN:
        widths = st.text_input("widths W1,W2,... (nodes per depth)", value=EXAMPLE_WIDTHS, key="ex_widths")
        builder = "width:" + widths.strip()
    elif builder in SAMPLED_BUILDER_NAMES + MIXED_BUILDER_NAMES:
        counts = st.text_input("draws K1,K2,... (per node, at each depth)", value=EXAMPLE_DRAWS, key="ex_draws")
        builder = builder.split(":")[0] + ":" + counts.strip()
    problem = builder_problem(builder)
    if problem:
        st.error(f"Refused: {problem}")
    verifiers, refused = verifier_options(builder)
    verifier = st.selectbox("verifier", verifiers, format_func=verifier_label, key="ex_verifier")
    if refused:
        with st.expander("not offered with this builder: " + ", ".join(refused)):
            for name, reason in refused.items():
                st.caption(f"{name}: {reason}")
    return builder, verifier


def show_draws_and_trail(record, index: int, logits_for: LogitsFor | None, can_rescore: bool, seed: int) -> None:
    """A sampled round's draws (from its DrawRecord) and the trail of its verifier on its tree: block's on a round
    block verified, else rrs's.

    `logits_for(index)` gives the round's node logits when they are at hand
    (kept, or re-scored on request when `can_rescore`); a trace keeps none.
    """
    if record.tree.draws is None:
        return
    rule = appdata.trail_rule(record)
    with st.expander(f"how this tree was drawn ({record.tree.draws.mode}) and the {rule} trail", expanded=True):
        st.caption("Each row is one draw from the drafter's q at its node, in draw order; equal i.i.d. draws "
                   "share one child node." + (" A mixed tree's first child at each node is FIXED (q's top-1, a "
                                              "point-mass draw: rrs accepts it with the target's probability of "
                                              "its token); the rows marked drawn came from q without it."
                                              if record.tree.draws.mixed else ""))
        st.dataframe(figures.draws_table(record), hide_index=True, key="ex_draws_table")
        if can_rescore:
            st.caption(f"This tree is one draw. The verifier comparison draws many at round {index}'s context (source "
                       "\"sampled trees at an explorer round's context\") and runs every rule on them.")
        have = st.session_state.get("ex_logits", {})
        if index not in have:
            if not can_rescore:
                st.info(f"The {rule} trail needs the round's node logits and proposal rows; a trace keeps neither "
                        "(the draws above are what it keeps). Run or Step a live generation to see the trail.")
                return
            button = st.empty()  # emptied once pressed: the trail it asked for takes its place
            if not button.button(f"compute the {rule} trail (re-scores this round: one target forward)",
                                 key=f"ex_trail_btn_{index}"):
                return
            button.empty()
        try:
            logits = logits_for(index)
            result = appdata.round_trail(record, logits, seed=seed + record.index)
        except (ValueError, RuntimeError, OSError) as err:
            st.error(f"No {rule} trail for this round: {err}")
            return
        trail = result.trail
        if result.recorded:
            st.markdown(f"**{rule} trail of this round's verdict** (exit node {trail.exit_node}, block length "
                        f"{len(trail.path)}):")
        else:
            st.markdown(f"**{rule} trail on this tree** (this round was verified by {record.verifier}; this is a "
                        f"fresh {rule} verdict drawn now with seed {seed + record.index}: exit node {trail.exit_node}, "
                        f"block length {len(trail.path)}):")
        if rule == "block":
            st.caption("Block verification carries a weight w down the chain (w_i = min(1, w_(i-1) p/q)), turns it "
                       "into a stop probability h at each node, and exits at the LAST node whose coin succeeds, "
                       "reading the coins from the chain's end: nodes above the exit are accepted with the block "
                       "even where their own p/q is small.")
        bonus = record.bonus_text if result.recorded else None
        st.dataframe(figures.trail_table(trail, record.tree, record.token_texts, bonus), hide_index=True,
                     key="ex_trail_table")


def show_siblings(records) -> None:
    """Per (depth, sibling rank) the accepted share, and the next depth after a top-1 or another pick."""
    by_rank, after = appdata.siblings_frames(records)
    st.markdown("**Sibling diagnostics** over these rounds (rank by the drafter's q among siblings; 0 = top-1)")
    if by_rank.empty:
        st.caption("No round with a verdict and a draft tree yet.")
        return
    s1, s2 = st.columns(2)
    s1.plotly_chart(figures.sibling_rank_figure(by_rank), key="ex_sibling_ranks")
    s2.plotly_chart(figures.after_pick_figure(after), key="ex_after_pick")
    with st.expander("sibling diagnostics (tables)", expanded=False):
        st.dataframe(by_rank, hide_index=True, key="ex_sibling_table")
        st.dataframe(after, hide_index=True, key="ex_after_table")
