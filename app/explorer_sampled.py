"""The explorer's tree choice and sampled-tree parts: the builder and the verifiers it admits, a round's draws
and its rrs or block trail, and the sibling diagnostics of the rounds so far.

The builders are the engine's `BUILDER_FAMILIES`, the pairing the rule
registry's `pairing_problem` (through `check_pairing`; both read through
`tevcore.studio.rules`), the trail the rule's own and the diagnostics
`lab.siblings`' (through `tevcore.studio.trails`); this module only lays them out.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st
import torch

import figures
from tevcore.studio import trails
from tevcore.studio.rules import BUILDER_FAMILIES, RULES, BuilderSpec, builder_help, check_pairing, verifier_label

# round index -> its node logits (a ValueError says why a round has none)
LogitsFor = Callable[[int], torch.Tensor]


def verifier_options(builder: BuilderSpec | None) -> tuple[list[str], dict[str, str]]:
    """The verifiers offered with `builder` (None: a builder the parser refused, which every rule that needs
    something of a tree is refused with): those the registry pairs with it, in registry order; and, for each
    one it refuses, the registry's one-line reason."""
    offered, refused = [], {}
    for name, rule in RULES.items():
        try:
            if builder is None and rule.needs:
                raise ValueError(f"{name} {rule.where}: choose a valid builder first")
            if builder is not None:
                check_pairing(name, builder)
        except ValueError as err:
            refused[name] = str(err)
        else:
            offered.append(name)
    return offered, refused


def builder_choice() -> tuple[BuilderSpec | None, str | None]:
    """The sidebar's builder: a family, and its counts in a text box where it takes some, made into a spec by
    the family (the engine's checks); returns the spec, or None and the one-line refusal (shown)."""
    families = list(BUILDER_FAMILIES.values())
    pattern = st.selectbox("builder", [family.pattern for family in families], key="ex_builder", help=builder_help())
    family = next(family for family in families if family.pattern == pattern)
    counts = ""
    if family.counts is not None:
        counts = st.text_input(f"{family.counts_help}: {family.counts}", value=family.example,
                               key="ex_draws" if family.draws else "ex_widths")
    try:
        return family.spec(counts.strip()), None
    except ValueError as err:
        st.error(f"Refused: {err}")
        return None, str(err)


def tree_choice() -> tuple[BuilderSpec | None, str | None, str]:
    """The builder (`builder_choice`) and the verifier among those the builder admits: (spec or None, the
    builder's refusal or None, verifier)."""
    builder, problem = builder_choice()
    verifiers, refused = verifier_options(builder)
    verifier = st.selectbox("verifier", verifiers, format_func=verifier_label, key="ex_verifier")
    if refused:
        with st.expander("not offered with this builder: " + ", ".join(refused)):
            for name, reason in refused.items():
                st.caption(f"{name}: {reason}")
    return builder, problem, verifier


def show_draws_and_trail(record, index: int, logits_for: LogitsFor, can_rescore: bool, have_rows: bool,
                         seed: int) -> None:
    """A sampled round's draws (from its DrawRecord) and the trail of its verifier on its tree: block's on a round
    block verified, else rrs's.

    `logits_for(index)` gives the round's node logits: kept ones when
    `have_rows`, else re-scored on request when `can_rescore`; a trace keeps none.
    """
    if record.tree.draws is None:
        return
    rule = trails.trail_rule(record)
    with st.expander(f"how this tree was drawn ({record.tree.draws.mode}) and the {rule} trail", expanded=True):
        st.caption("Each row is one draw from the drafter's q at its node, in draw order; equal i.i.d. draws "
                   "share one child node." + (" A mixed tree's first child at each node is FIXED (q's top-1, a "
                                              "point-mass draw, marked ◇ in the tree); the rows marked drawn came "
                                              "from q without it. rrs tries the drawn siblings first, each divided "
                                              "by that proposal, and the fixed child last: it is accepted with the "
                                              "residual's whole mass on its token."
                                              if record.tree.draws.mixed else ""))
        st.dataframe(figures.draws_table(record), hide_index=True, key="ex_draws_table")
        if can_rescore:
            st.caption(f"This tree is one draw. The verifier comparison draws many at round {index}'s context (source "
                       "\"sampled trees at an explorer round's context\") and runs every rule on them.")
        if not have_rows:
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
            result = trails.round_trail(record, logits, seed=seed + record.index)
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
        if RULES[rule].trail_note:
            st.caption(RULES[rule].trail_note)
        bonus = record.bonus_text if result.recorded else None
        st.dataframe(figures.trail_table(trail, record.tree, record.token_texts, bonus), hide_index=True,
                     key="ex_trail_table")


def show_siblings(records) -> None:
    """Per (depth, sibling rank) the accepted share, and the next depth after a top-1 or another pick."""
    by_rank, after = trails.siblings_frames(records)
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
