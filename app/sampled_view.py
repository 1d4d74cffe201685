"""The verifier comparison's sampled rounds (streamlit): draw them, pick a realised tree, compare across rounds.

The rounds are fresh draws of a sampled builder's tree at one toy context
(`appdata.sampled_rounds`); the rules run through the engine
(`appdata.rules_over_rounds`, `tevcore.lab.simulate`). This module only lays
out widgets, tables and figures.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import appdata
import figures
from tevcore.verify.verifiers import verifier_label

SOURCE = "sampled trees (toy target, fresh draws at one context)"
DEFAULT_BUILDER = "sampled:3,2,1"
HONEST_NOTE = ("rrs's law on one tree is not TEV's: given the tree it accepts a drawn child more often than the "
               "target's mass would allow on some trees and less on others. Both are exact over the draw of the "
               "tree: averaged over the trees the builder draws, each emits target samples (the table below tests "
               "their first tokens). TEV is exact given every tree, so its law on this tree is X(v).")


def choose_round(ss) -> tuple[appdata.SampledRounds, tuple, appdata.CompactRound]:
    """The drawn rounds (redrawn when a setting changes), the key of the picked round and that round's tree."""
    c1, c2, c3, c4, c5 = st.columns(5)
    builder = c1.text_input("sampled builder", DEFAULT_BUILDER, key="vc_s_builder",
                            help="sampled:K1,K2,... (i.i.d. draws) or sampled-wor:K1,K2,... (without replacement); "
                                 "sampled:1,1,... is a sampled chain, where block verification also runs")
    budget = int(c2.number_input("budget", 1, 64, 16, key="vc_s_budget"))
    temperature = float(c3.number_input("temperature", 0.0, 5.0, 1.0, step=0.1, key="vc_s_temp",
                                        help="the trees are drawn from q at this temperature and the rules divide "
                                             "by that very q: changing it redraws the rounds"))
    rounds = int(c4.number_input("rounds (fresh trees)", 10, 5_000, 200, step=50, key="vc_s_rounds"))
    seed = int(c5.number_input("draw seed", 0, 10_000, 0, key="vc_s_seed"))
    settings = (builder.strip(), budget, temperature, rounds, seed)
    drawn = ss.get("vc_s_drawn")
    if drawn is None or drawn[0] != settings:
        try:
            with st.spinner(f"drawing {rounds} trees with {builder.strip()}…"):
                drawn = (settings, appdata.sampled_rounds(builder.strip(), rounds, budget, temperature, seed))
        except ValueError as err:
            st.error(f"Refused: {err}")
            st.stop()
        ss.vc_s_drawn = drawn
    sampled = drawn[1]
    index = int(st.number_input("realised tree (round)", 0, rounds - 1, 0, key="vc_s_round"))
    tree, logits = sampled.rounds[index]
    st.caption(f"{rounds} independent draws of {sampled.builder}'s tree at one context of a toy target whose row "
               f"after every path is fixed (exact rows, vocabulary {len(sampled.vocab_texts)}); the drafter gives "
               f"one row per depth. Round {index}'s tree has {tree.size} nodes.")
    return sampled, (settings, index), appdata.CompactRound(tree, logits, sampled.vocab_texts, approximate=False)


def tree_against_rrs(results: dict, labels: list[str], law, rrs_law) -> None:
    """On the picked tree: TEV's exit law X against rrs's empirical exits (and rrs's own law on this tree)."""
    st.subheader("This realised tree: TEV's exit law against rrs's outcomes")
    if "rrs" not in results or rrs_law is None:
        st.caption("Select rrs among the verifiers to see its outcomes on this tree.")
        return
    rrs = results["rrs"]
    freq = (rrs.exit_counts.double() / rrs.n).numpy()
    st.plotly_chart(figures.tev_against_rrs_figure(labels, law.exit_mass.numpy(), rrs_law.exit_probs.numpy(), freq),
                    key="vc_s_tev_rrs")
    st.caption(f"{rrs.n:,} rrs verifications of this one tree. On it TEV's E[L] is 1 + C = "
               f"{law.expected_length:.4f}; rrs's own law gives "
               f"{rrs_law.expected_length:.4f} and its draws {rrs.mean_block_length:.4f} ± "
               f"{rrs.block_length_stderr:.4f}. {HONEST_NOTE}")


def across_rounds(ss, sampled: appdata.SampledRounds, chosen: list[str], seed: int, standing: dict[str, str]) -> None:
    """Every chosen rule once per round on the same trees: E[L] against E[1 + C], and the first-token test."""
    st.subheader("Across rounds: E[L] against E[1 + C]")
    st.caption(f"Each rule verifies every one of the {len(sampled.rounds)} realised trees once, as a decoding run "
               "would (the same trees for every rule). An exact-given-tree rule has E[L | tree] = 1 + C(tree), so "
               "its gap is zero up to noise; a proposal-ratio rule's need not be: 1 + C is its yardstick, not its "
               "cap. Every round starts at the same context, so an exact rule's first emitted token is a sample of "
               "the target's row there, whichever tree was drawn: the χ² column tests that.")
    signature = (id(sampled), tuple(chosen), seed)
    if st.button("▶ Verify every round", key="vc_s_run_rounds"):
        with st.spinner(f"{len(chosen)} rules × {len(sampled.rounds)} rounds…"):
            ss.vc_s_over = (signature, appdata.rules_over_rounds(chosen, sampled, seed))
    stored = ss.get("vc_s_over")
    if not stored or stored[0] != signature:
        st.info("Press **Verify every round** to run the chosen rules on every realised tree.")
        return
    found = stored[1]
    context = sampled.context_probs
    rows = []
    for name, result in found.items():
        (mean_l, se_l), (mean_c, se_c), (gap, se_gap) = (result.mean_block_length(), result.mean_expected_length(),
                                                         result.length_gap())
        rows.append({"verifier": verifier_label(name), "standing": standing[name], "E[L]": mean_l, "E[L] ± s.e.": se_l,
                     "E[1 + C]": mean_c, "E[1 + C] ± s.e.": se_c, "gap E[L] − E[1 + C]": gap, "gap ± s.e.": se_gap,
                     "first token χ² p (vs the target's row)": result.first_token_pvalue(context)})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="vc_s_rounds_table")
    any_result = next(iter(found.values()))
    fixed = sampled.best_first_length
    st.plotly_chart(figures.rounds_length_figure({n: r.mean_block_length() for n, r in found.items()},
                                                 any_result.mean_expected_length(),
                                                 {n: verifier_label(n) for n in found},
                                                 ("fixed best-first + TEV, same budget", fixed)),
                    key="vc_s_rounds_chart")
    st.caption(f"The dotted line is the other school on the same toy drafter, target and context: the fixed "
               f"best-first tree of {sampled.best_first[0].size} nodes, where TEV's E[L] is its 1 + C = {fixed:.3f}. "
               "A toy pair shows the mechanics, not which school wins on a real model (`tevcore bench --builders` "
               "measures that).")
