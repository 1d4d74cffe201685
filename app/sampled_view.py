"""The verifier comparison's sampled rounds (streamlit): draw them, pick a realised tree, compare across rounds.

The rounds are fresh draws of a sampled builder's tree at one context: of a
toy target, or at a live explorer round's context with the explorer's drafter
and target; both are drawn, and the rules run over them, by the studio's
services (`tevcore.studio.comparison`: the server's caps, a compute-queue
turn). This module only lays out widgets, tables and figures.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import appdata
import figures
import room_ui
from comparison_state import ComparisonSession, Made, changes
from explorer_state import ExplorerSession
from kept_widgets import within
from tevcore.studio import comparison as studio_comparison
from tevcore.studio.claims import gap_claim
from tevcore.studio.comparison import TOO_FEW_ROUNDS, RoundsRequest, SampledRounds
from tevcore.studio.rules import sampled_builder_help, verifier_label
from tevcore.studio.toy_rounds import toy_texts

SOURCE = "sampled trees (toy target, fresh draws at one context)"
LIVE_SOURCE = "sampled trees at an explorer round's context (its target and drafter)"
DEFAULT_BUILDER = "sampled:3,2,1"
LIVE_BUILDER = "sampled:2,1,1"  # fits every drafter's depth (the stand-in rollout's is 4)
LIVE_ROUNDS = 100  # one drafter and one target forward each (the README gives the time on a small CPU)
SUMMARY_COLUMNS = {"mean_emitted": "E[L]", "mean_emitted_se": "E[L] ± s.e.",
                   "mean_expected_length": "E[1 + C]", "mean_expected_length_se": "E[1 + C] ± s.e.",
                   "gap": "gap E[L] − E[1 + C]", "gap_se": "gap ± s.e.",
                   "first_token_p": "first token χ² p (vs the target's row)"}  # RoundsResult.summary, as shown
HONEST_NOTE = ("rrs's law on one tree is not TEV's: given the tree it accepts a drawn child more often than the "
               "target's mass would allow on some trees and less on others. Both are exact over the draw of the "
               "tree: averaged over the trees the builder draws, each emits target samples (the table below tests "
               "their first tokens). TEV is exact given every tree, so its law on this tree is X(v).")


def _draw_settings(state: ComparisonSession, prefix: str, builder: str, budget: int, temperature: float,
                   rounds: int, max_rounds: int) -> RoundsRequest:
    """The builder, budget, temperature, round count and seed of the drawn rounds (widgets keyed by `prefix`, their
    values kept in the page's state)."""
    w = state.widgets
    c1, c2, c3, c4, c5 = st.columns(5)
    builder = w.kept(f"{prefix}_builder", c1.text_input("sampled builder", **w.args(f"{prefix}_builder", builder),
                                                        help=sampled_builder_help()))
    budget = int(w.kept(f"{prefix}_budget", c2.number_input("budget", 1, 64, **w.args(
        f"{prefix}_budget", budget, within(1, 64)))))
    temperature = float(w.kept(f"{prefix}_temp", c3.number_input(
        "temperature", 0.0, 5.0, step=0.1, **w.args(f"{prefix}_temp", float(temperature), within(0.0, 5.0)),
        help="the trees are drawn from q at this temperature and the rules divide by that very q: changing it "
             "redraws the rounds")))
    rounds = int(w.kept(f"{prefix}_rounds", c4.number_input(
        "rounds (fresh trees)", 10, max_rounds, step=50, **w.args(f"{prefix}_rounds", rounds,
                                                                      within(10, max_rounds)))))
    seed = int(w.kept(f"{prefix}_seed", c5.number_input("draw seed", 0, 10_000, **w.args(
        f"{prefix}_seed", 0, within(0, 10_000)))))
    return RoundsRequest(builder.strip(), budget, temperature, rounds, seed)


def _words(request: RoundsRequest) -> dict[str, str]:
    return {"builder": request.builder, "budget": str(request.budget), "temperature": f"{request.temperature:g}",
            "rounds": str(request.rounds), "draw seed": str(request.seed)}


def _picked(state: ComparisonSession, sampled: SampledRounds, texts, drawn_key: tuple,
            prefix: str) -> tuple[tuple, appdata.CompactRound]:
    """The realised tree the user picks: its key and its round."""
    last = len(sampled.rounds) - 1
    w = state.widgets
    index = int(w.kept(f"{prefix}_round", st.number_input("realised tree (round)", 0, last, **w.args(
        f"{prefix}_round", 0, within(0, last)))))
    if state.picked is None or state.picked.key != (drawn_key, index):  # rows let go are scored again, in line
        with room_ui.seat() as asking:
            state.picked = Made((drawn_key, index), {}, studio_comparison.picked_round(asking, sampled, index))
    tree, logits = state.picked.value
    return (drawn_key, index), appdata.CompactRound(tree, logits, texts, approximate=False)


def choose_round(state: ComparisonSession) -> tuple[SampledRounds, tuple, appdata.CompactRound]:
    """Toy rounds (redrawn when a setting changes), the key of the picked round and that round's tree."""
    request = _draw_settings(state, "vc_s", DEFAULT_BUILDER, 16, 1.0, 200, 5_000)
    key = ("toy", request)
    if state.toy_drawn is None or state.toy_drawn.key != key:
        try:
            builder = request.spec()
            with st.spinner(f"drawing {request.rounds} trees with {request.builder}…"), room_ui.seat() as asking:
                drawn = studio_comparison.toy_rounds(asking, builder, request.rounds, request.budget,
                                                     request.temperature, request.seed)
        except ValueError as err:
            st.error(f"Refused: {err}")
            st.stop()
        state.toy_drawn = Made(key, _words(request), drawn)
    sampled = state.toy_drawn.value
    picked, compact = _picked(state, sampled, toy_texts(), key, "vc_s")
    st.caption(f"{request.rounds} independent draws of {sampled.builder}'s tree at one context of a toy target whose "
               f"row after every path is fixed (exact rows, vocabulary {len(toy_texts())}); the drafter gives "
               f"one row per depth. Round {picked[1]}'s tree has {compact.tree.size} nodes.")
    return sampled, picked, compact


def choose_live_round(state: ComparisonSession,
                      explorer: ExplorerSession) -> tuple[SampledRounds, tuple, appdata.CompactRound]:
    """Rounds drawn at a live explorer round's context by the explorer's drafter, each scored by its target (drawn
    when the button is pressed: each tree costs a drafter and a target forward), and the picked round's tree. Trees
    drawn before with other settings stay shown, saying so, until the button draws new ones."""
    records, made_with, w = explorer.records, explorer.settings, state.widgets
    last = len(records) - 1
    at = int(w.kept("vc_l_context", st.number_input(
        "explorer round (whose context the trees start from)", 0, last,
        **w.args("vc_l_context", min(explorer.selected_round, last), within(0, last)))))
    record = records[at]
    request = _draw_settings(state, "vc_l", made_with.sampled_builder or LIVE_BUILDER,
                             min(max(made_with.budget, 1), 64), float(record.temperature), LIVE_ROUNDS, 2_000)
    key = ("live", explorer.started, at, request)
    words = {"explorer round": str(at), **_words(request)}
    drawn = state.live_drawn if state.live_drawn is not None and state.live_drawn.key[1] == explorer.started else None
    fresh = drawn is not None and drawn.key == key
    if st.button("▶ Draw the trees" if not fresh else "▶ Draw them again", key="vc_l_draw"):
        room_ui.check(room_ui.guarded.check_sampled, request.rounds, request.budget)  # full-vocabulary rows each
        try:
            drawn = state.live_drawn = Made(key, words, _draw_live(explorer, at, request))
        except ValueError as err:
            st.error(f"Refused: {err}")
            st.stop()
        except Exception as err:  # a model that no longer loads, a context past the model's length ...
            st.error(f"Could not draw the trees ({type(err).__name__}: {err})")
            st.stop()
    if drawn is None:
        st.info(f"Press **Draw the trees** to draw {request.rounds} trees with {request.builder} at explorer round "
                f"{at}'s context ({record.context_length} tokens): each is one drafter and one target forward.")
        st.stop()
    if drawn.key != key:
        st.warning("The trees shown were drawn with other settings: " + "; ".join(changes(drawn, words))
                   + ". Press **Draw the trees** to draw them with the settings above.")
    sampled, texts, where = drawn.value
    picked, compact = _picked(state, sampled, texts, drawn.key, "vc_l")
    st.caption(f"{len(sampled.rounds)} independent draws of {sampled.builder}'s tree {where}; each tree scored by the "
               f"target in one forward (exact rows, full vocabulary). Round {picked[1]}'s tree has "
               f"{compact.tree.size} nodes.")
    return sampled, picked, compact


def _draw_live(explorer: ExplorerSession, at: int,
               request: RoundsRequest) -> tuple[SampledRounds, appdata.LazyTexts, str]:
    """The drawn rounds, the target's token texts and where they were drawn (for the caption)."""
    import shared_ui

    builder = request.spec()
    target = shared_ui.get_target(explorer.target_spec)
    proposer, note = shared_ui.proposer_with_fallback(explorer.settings.proposer, explorer.target_spec)
    context = explorer.context(at)
    bar = st.progress(0.0, text=f"drawing and scoring {request.rounds} trees…")
    with room_ui.seat() as asking:  # the service takes the compute-queue turn
        sampled = studio_comparison.context_rounds(
            asking, target, proposer, context, builder, request.budget, request.temperature, request.rounds,
            request.seed, progress=lambda done, total: bar.progress(done / total, text=f"tree {done}/{total}"))
    bar.empty()
    if note:
        st.warning(note)
    where = f"by {proposer.name} at explorer round {at}'s context ({len(context)} tokens) of {target.name}"
    return sampled, appdata.LazyTexts(lambda t: shared_ui.decode_text(target, t)), where


def sampled_label(name: str) -> str:
    """A rule's name on sampled trees: its registry label (the foil says it is NOT exact there too: its entry's
    `on_drawn` says why)."""
    return verifier_label(name)


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
               f"{rrs_law.expected_length:.4f} and its draws {rrs.mean_emitted:.4f} ± "
               f"{rrs.emitted_stderr:.4f}. {HONEST_NOTE}")


def across_rounds(state: ComparisonSession, sampled: SampledRounds, chosen: list[str], seed: int,
                  standing: dict[str, str], live: bool) -> None:
    """Every chosen rule once per round on the same trees: E[L] against E[1 + C], and the first-token test."""
    st.subheader("Across rounds: E[L] against E[1 + C]")
    st.caption(f"Each rule verifies every one of the {len(sampled.rounds)} realised trees once, as a decoding run "
               "would (the same trees for every rule). " + gap_claim(chosen, sampled.temperature)
               + " Every round starts at the same context, so an exact rule's first emitted token is a sample of "
               "the target's row there, whichever tree was drawn: the χ² column tests that.")
    drawn = state.live_drawn if live else state.toy_drawn
    key = (drawn.key, tuple(chosen), seed)
    words = {**drawn.settings, "verifiers": ", ".join(chosen), "seed": str(seed)}
    if st.button("▶ Verify every round", key="vc_s_run_rounds"):
        with st.spinner(f"{len(chosen)} rules × {len(sampled.rounds)} rounds…"), room_ui.seat() as asking:
            state.over = Made(key, words, (studio_comparison.across_rounds(asking, chosen, sampled, seed), sampled,
                                           dict(standing)))
    if state.over is None or state.over.key[0][0] != drawn.key[0]:  # nothing run on this source's trees
        st.info("Press **Verify every round** to run the chosen rules on every realised tree.")
        return
    if state.over.key != key:
        st.warning("The rounds' results shown were made with other settings: "
                   + "; ".join(changes(state.over, words) or ["other trees"])
                   + ". Press **Verify every round** to run them with the settings above.")
    found, sampled, standing = state.over.value
    context = sampled.context_probs
    rows = [{"verifier": sampled_label(name), "standing": standing[name], **result.summary(context)}
            for name, result in found.results.items()]
    p_column = SUMMARY_COLUMNS["first_token_p"]  # a tiny p-value in scientific notation, not as 0.0000
    st.dataframe(pd.DataFrame(rows).rename(columns=SUMMARY_COLUMNS), hide_index=True, key="vc_s_rounds_table",
                 column_config={p_column: st.column_config.NumberColumn(p_column, format="%.3g")})
    st.caption("Standing in full (the table cuts long ones): " + " · ".join(
        f"**{sampled_label(name)}**: {standing[name]}" for name in found.results))
    unknown = [sampled_label(name) for name in found.unknown_gaps()]
    if unknown:
        st.caption(f"gap ± s.e. of {', '.join(unknown)}: {TOO_FEW_ROUNDS}. Every round ended with the same block "
                   "length (or there is one round), and the rule's law given a tree is not X, so nothing here "
                   "measures its noise: draw more rounds. For an optimal rule the s.e. then comes from X's own "
                   "Var(L | tree).")
    any_result = next(iter(found.results.values()))
    fixed = sampled.best_first_length
    st.plotly_chart(figures.rounds_length_figure({n: r.mean_emitted() for n, r in found.results.items()},
                                                 any_result.mean_expected_length(),
                                                 {n: sampled_label(n) for n in found.results},
                                                 (f"fixed best-first ({sampled.best_first[0].size} nodes) + TEV",
                                                  fixed)),
                    key="vc_s_rounds_chart")
    show_ceilings(found.ceilings)
    pair = "drafter, target and context" if live else "toy drafter, target and context"
    st.caption(f"The dotted line is the other school on the same {pair}: the fixed best-first tree, where TEV's E[L] "
               f"is its 1 + C = {fixed:.3f}; sizes: {sampled.size_note()} (the fixed tree is as large as the largest "
               f"drawn one, never above the budget). "
               + ("One context is one point of a decode; `tevcore bench --builders` compares the schools over "
                  "whole decodes and their speed." if live else
                  "A toy pair shows the mechanics, not which school wins on a real model (pick the source at an "
                  "explorer round's context, or run `tevcore bench --builders`)."))


def show_ceilings(ceilings: dict[str, list[dict]]) -> None:
    """Each design against its own ceiling per depth (found by the studio with the rounds' results): the drawn
    trees under rrs, the matched best-first tree under TEV."""
    with st.expander("each design against its own ceiling, per depth", expanded=False):
        st.caption("Per node: the best acceptance any exact rule could reach there given how its children came to "
                   "be (fixed children: the sum of p over them; a mixed node: p(fixed) plus the best acceptance of "
                   "its drawn siblings; k ≤ 3 draws: the optimal coupling, a linear program on the top tokens, "
                   "exact where the LP tail is 0), beside what the rule reached, averaged over the nodes of each "
                   "depth. The same table as `tevcore rounds-at-context` prints.")
        for title, rows in ceilings.items():
            st.markdown(f"**{title}**")
            st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"vc_s_ceilings_{title}")
