"""Verifier comparison: every verifier on one recorded tree, many draws each, against the exit law.

The page collects the tree and the settings and renders what the studio's services found
(`tevcore.studio.comparison`); everything it shows lives in one `ComparisonSession`, so a page switch or a reload
finds the participant's trees and results again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

import appdata  # noqa: E402
import explorer_run  # noqa: E402
import figures  # noqa: E402
import room_ui  # noqa: E402
import sampled_view  # noqa: E402
from comparison_state import ComparisonSession, Made, Shown, changes  # noqa: E402
from explorer_state import ExplorerSession  # noqa: E402
from figures.common import top_shares  # noqa: E402
from kept_widgets import among, within  # noqa: E402
from tevcore.studio import comparison as studio_comparison, traces as studio_traces  # noqa: E402
from tevcore.studio.rules import (FOIL, MAX_SEED, OPTIMAL, get_rule, held_to_x, law_name,  # noqa: E402
                                  laws_held_to_text, rules_for, rules_on, standing, standing_text, verifier_label,
                                  x_law_label)
from tevcore.studio.synthetic import synthetic_record  # noqa: E402

EXPLORER_SOURCE = "a round from the tree explorer"
EXAMPLE_SOURCE = "example tree (toy target, exact rows)"
TRACE_SOURCE = "a round from a trace file"


@dataclass(frozen=True)
class Studied:
    """The tree on screen: its round, where it came from (`key`, stable across reruns; `words`, for the page), the
    drawn rounds it was picked from (sampled sources), and the record it came with."""

    compact: object  # appdata.CompactRound
    key: tuple
    words: str
    record: object
    sampled: object = None  # tevcore.studio.comparison.SampledRounds of the sampled sources


def explorer_round(state: ComparisonSession, explorer: ExplorerSession) -> Studied:
    records, w = explorer.records, state.widgets
    last = len(records) - 1
    index = int(st.number_input("round", 0, last, **w.args("vc_round", min(explorer.selected_round, last),
                                                              within(0, last))))
    w.kept("vc_round", index)
    record, compact = records[index], None
    if explorer.is_live:
        try:
            with st.spinner("re-scoring the round's tree on the target (one forward)…"):
                logits, drift = explorer_run.round_rows(explorer, index)  # kept by the explorer's session
        except ValueError as err:  # no model, a context mismatch: fall back to the stored rows
            st.error(f"Could not re-score the round ({err}). Using approximate rows instead.")
        else:
            target = shared_ui.get_target(explorer.target_spec)
            compact = appdata.exact_round(record, logits, lambda t: shared_ui.decode_text(target, t))
            st.caption("exact target rows (re-scored)" + (f"; they reproduce the recorded X to {drift:.1e}"
                                                           if drift is not None else ""))
    if compact is None:
        compact = appdata.approximate_round(record)
    return Studied(compact, explorer.round_key(index), f"explorer round {index}", record)


def trace_round(state: ComparisonSession) -> Studied:
    upload = st.file_uploader("trace file (.jsonl or .jsonl.gz)", type=["jsonl", "gz"], key="vc_upload")
    if upload is not None and (state.trace is None or state.trace.key != (upload.file_id,)):
        try:  # read once per upload, not on every rerun: the server's byte caps, parsed in a compute-queue turn
            with room_ui.seat() as asking:
                opened = studio_traces.open_trace(asking, room_ui.read_upload(upload.getvalue(), upload.name))
        except (ValueError, OSError) as err:
            st.error(f"Could not open {upload.name}: {err}")
            st.stop()
        state.trace = Made((upload.file_id,), {"trace": upload.name}, opened)
    if state.trace is None:
        st.info("Upload a trace saved by the tree explorer or `python -m tevcore generate --out`.")
        st.stop()
    name, trace = state.trace.settings["trace"], state.trace.value
    if upload is None:
        st.caption(f"The trace opened before: {name} (upload another file to replace it).")
    last = len(trace.rounds) - 1
    index = int(st.number_input("round", 0, last, **state.widgets.args("vc_trace_round", 0, within(0, last))))
    state.widgets.kept("vc_trace_round", index)
    record = trace.rounds[index]
    return Studied(appdata.approximate_round(record), (state.trace.key, index), f"{name} round {index}", record)


def example_round(state: ComparisonSession) -> Studied:
    w = state.widgets
    c1, c2 = st.columns(2)
    budget = int(w.kept("vc_ex_budget", c1.number_input("example tree budget", 2, 128,
                                                       **w.args("vc_ex_budget", 24, within(2, 128)))))
    seed = int(w.kept("vc_ex_seed", c2.number_input("example seed", 0, 10_000,
                                                   **w.args("vc_ex_seed", 0, within(0, 10_000)))))
    record, logits = synthetic_record(budget=budget, seed=seed)
    texts = [f"t{i}" for i in range(logits.shape[-1])]
    return Studied(appdata.CompactRound(record.tree, logits, texts, approximate=False), ("example", budget, seed),
                   f"example tree (budget {budget}, seed {seed})", record)


def sampled_round(state: ComparisonSession, explorer: ExplorerSession, live: bool) -> Studied:
    if live:
        sampled, key, compact = sampled_view.choose_live_round(state, explorer)
    else:
        sampled, key, compact = sampled_view.choose_round(state)
    return Studied(compact, key, f"realised tree {key[1]} of the drawn rounds", key, sampled)


def choose_tree(state: ComparisonSession, explorer: ExplorerSession) -> tuple[str, Studied]:
    sources = [EXAMPLE_SOURCE, sampled_view.SOURCE]
    if explorer.records:
        sources.insert(0, EXPLORER_SOURCE)
        if explorer.is_live:  # a live generation: its context can be redrawn from
            sources.insert(3, sampled_view.LIVE_SOURCE)
    sources.append(TRACE_SOURCE)
    w = state.widgets
    source = w.kept("vc_source", st.radio("tree", sources, horizontal=True,
                                          **w.choice("vc_source", sources)))
    if source == EXPLORER_SOURCE:
        return source, explorer_round(state, explorer)
    if source == TRACE_SOURCE:
        return source, trace_round(state)
    if source in (sampled_view.SOURCE, sampled_view.LIVE_SOURCE):
        return source, sampled_round(state, explorer, live=source == sampled_view.LIVE_SOURCE)
    return source, example_round(state)


def tree_law(state: ComparisonSession, source: str, studied: Studied, temperature: float):
    """The exit law of the tree on screen, computed once per tree and temperature by the studio."""
    key = (source, studied.key, float(temperature))
    if state.law is None or state.law.key != key:
        try:
            with room_ui.seat() as asking:
                law = studio_comparison.study_tree(asking, studied.compact.tree, studied.compact.node_logits,
                                                   temperature)
        except ValueError as err:
            st.error(f"The tree and its rows do not fit: {err}")
            st.stop()
        state.law = Made(key, {}, law)
    return state.law.value


def run_verifiers(state: ComparisonSession, request, studied: Studied, key: tuple, settings: dict[str, str],
                  drawn: bool, standing_words: dict[str, str]) -> None:
    with st.status(f"simulating {request.draws:,} verifications per verifier…", expanded=True) as status:
        bar = st.progress(0.0)
        try:
            with room_ui.seat() as asking:  # the draws take a compute-queue turn inside the service
                found = studio_comparison.compare_verifiers(
                    asking, request, studied.compact.tree, studied.compact.node_logits,
                    progress=lambda done, total, name: bar.progress(done / max(total, 1),
                                                                    text=f"{verifier_label(name)} done"))
        except ValueError as err:
            room_ui.refused(err)
        for name, why in found.draws.failures.items():  # one verifier failing does not hide the others
            st.error(f"{verifier_label(name)} failed ({why})")
        status.update(label="simulation finished", state="complete", expanded=False)
    texts = studied.compact.vocab_texts
    labels = [f"{v} {figures.short(str(texts[int(t)]), 8)}" if v else "0 root"
              for v, t in enumerate(studied.compact.tree.tokens.tolist())]
    state.results = Made(key, settings, Shown(found, labels, texts, drawn, standing_words))


def show_results(state: ComparisonSession, shown: Shown) -> None:
    found = shown.comparison
    results, latencies, law = found.results, found.draws.latencies, found.law
    temperature, labels, words = found.request.temperature, shown.labels, shown.standing
    freq = {name: r.exit_shares().numpy() for name, r in results.items()}
    rows = [{"verifier": verifier_label(name), f"at T = {temperature:g}": words[name],
             "mean L": r.mean_emitted, "± s.e.": r.emitted_stderr,
             "E[L] of its law": found.own_laws[name].expected_length,
             "exit χ² p (vs its law)": found.exit_p[name],
             "bonus χ² p (all exits, vs its law)": found.bonus_p[name],
             "decision latency (µs)": 1e6 * latencies.get(name, float("nan")),
             f"simulated {r.n:,} draws (s)": r.seconds}
            for name, r in results.items()]
    st.subheader("Summary")
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="vc_summary")
    st.caption("χ² compares each verifier's exit counts and bonus-given-exit counts with the law it must follow if "
               f"exact: {laws_held_to_text(list(results), temperature)}. Small cells are pooled (expected < 5). A tiny "
               "p-value for an exact verifier would be a bug; for the foil it is the test's power.")
    st.caption(f"Decision latency: one real verifier call on this same tree for every verifier, given the round's "
               f"target flow (as the decoding loop calls it), median of {studio_comparison.LATENCY_REPEATS} timed "
               "calls after one warm-up call, wall clock (`tevcore.timing`). On a toy vocabulary the fixed per-call "
               "overhead dominates; on a real vocabulary the bonus draw over V does. `python -m tevcore "
               "bench-verifiers` measures it on real trees, with and without the flow handed in.")
    groups = {name: standing(name, temperature) for name in results}
    same_law = [n for n in results if groups[n] == OPTIMAL]
    foils = [n for n in results if groups[n] == FOIL]
    own_law_names = [n for n in results if not held_to_x(n, temperature)]
    left, middle, right = st.columns(3)
    with left:
        st.markdown(f"**Exact and optimal at T = {temperature:g}: exit law X**")
        st.plotly_chart(figures.exit_law_figure(labels, law.exit_mass.numpy(), {n: freq[n] for n in same_law},
                                                law_name=x_law_label(temperature)), key="vc_exit_exact")
    with middle:
        st.markdown("**Tested against their own law on this tree**" + (" (" + "; ".join(
            f"{n}: {law_name(n, temperature)}" for n in own_law_names) + ")" if own_law_names else ""))
        for n in own_law_names:
            st.plotly_chart(figures.exit_law_figure(labels, found.own_laws[n].exit_probs.numpy(), {n: freq[n]},
                                                    top=12, law_name=law_name(n, temperature)), key=f"vc_exit_{n}")
    with right:
        st.markdown("**:red[Naive ratio rule — NOT exact]**" + (" (teaching foil)" if not shown.drawn else ""))
        for foil in foils:  # the rules whose registry standing is the foil's: tested against X, which they miss
            if shown.drawn:
                st.caption(words[foil])
            st.plotly_chart(figures.exit_law_figure(labels, law.exit_mass.numpy(), {foil: freq[foil]},
                                                    law_name=law_name(foil, temperature)), key=f"vc_exit_foil_{foil}")
        if not foils:
            st.caption("not selected")
    lengths = {n: r.length_shares().numpy() for n, r in results.items()}
    st.plotly_chart(figures.length_histogram_figure(lengths, law.flow.expected_length,
                                                    {n: r.mean_emitted for n, r in results.items()},
                                                    {n: words[n] for n in results}), key="vc_lengths")
    show_bonus(state, shown)
    st.plotly_chart(figures.latency_figure(latencies), key="vc_latency")
    if shown.drawn:
        sampled_view.tree_against_rrs(results, labels, law, found.own_laws.get("rrs"))


def show_bonus(state: ComparisonSession, shown: Shown) -> None:
    """The bonus law at one exit node (picked among the 30 X visits most) against each verifier's bonus draws."""
    found, labels, w = shown.comparison, shown.labels, state.widgets
    law, temperature = found.law, found.request.temperature
    order = [int(v) for v in np.argsort(-law.exit_mass.numpy(), kind="stable")[:30]]
    exit_pick = w.kept("vc_bonus_node", st.selectbox(
        "bonus distribution at exit node", order, **w.choice("vc_bonus_node", order),
        format_func=lambda v: f"{labels[v]} (X = {float(law.exit_mass[v]):.4f})"))
    there = studio_comparison.bonus_at_exit(found, exit_pick)
    top = np.argsort(-there.law, kind="stable")[:12]
    token_labels = [figures.short(str(shown.texts[int(t)]), 10) + f" #{int(t)}" for t in top] + ["(rest)"]
    empirical = {name: top_shares(shares, top) for name, shares in there.shares.items()
                 if held_to_x(name, temperature)}  # a rule with a bonus law of its own: its p-value is in the table
    st.plotly_chart(figures.bonus_figure(token_labels, top_shares(there.law, top), empirical, labels[exit_pick],
                                         law_name=f"bonus law: p(.|exit) at T = {temperature:g}, children masked"),
                    key="vc_bonus")
    rows = [{"verifier": verifier_label(name), "exits here": there.exits[name],
             "bonus χ² p (vs its law)": there.pvalues[name]} for name in there.exits]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="vc_bonus_table")


def show_result_files(state: ComparisonSession) -> None:
    st.divider()
    st.subheader("End to end: benchmark results")
    st.caption("Result files of the measuring commands (`bench`, `bench-verifiers`, `rounds-at-context`, "
               "`eval-drafter --json`, `compare`, the GPU proof): each with the run's meta block and its rows; "
               "bench's speculative rows draw the figures.")
    uploads = st.file_uploader("result files", type=["json"], accept_multiple_files=True, key="vc_bench_upload")
    w = state.widgets
    if room_ui.in_room():  # a room: no server path is typed
        folder = room_ui.space().folder
    else:
        folder = Path(w.kept("vc_bench_folder", st.text_input("or read every .json in a folder",
                                                              **w.args("vc_bench_folder", "results"))))
    key = (tuple(up.file_id for up in uploads or []), str(folder), studio_comparison.folder_listing(folder))
    if state.result_files is None or state.result_files.key != key:
        files, too_big = [], {}
        for up in uploads or []:
            try:
                files.append(room_ui.read_upload(up.getvalue(), up.name))
            except ValueError as err:
                too_big[up.name] = str(err)
        with room_ui.seat() as asking:  # read in a compute-queue turn
            read = studio_comparison.read_result_files(asking, files, folder)
        state.result_files = Made(key, {}, (read, too_big))
    read, too_big = state.result_files.value
    for why in [*too_big.values(), *read.refused_uploads.values()]:
        st.error(why)
    for path, why in read.refused_files.items():
        st.warning(f"{path}: {why}")
    records = read.records
    if records:
        st.dataframe(appdata.runs_frame(records), hide_index=True, key="vc_bench_runs")
    bench = appdata.bench_rows(records)
    plotted = set(bench.get("file", []))
    if not bench.empty:
        for facet in ("dataset", "temperature"):
            if facet in bench and bench[facet].nunique() > 1:
                values = sorted(bench[facet].dropna().unique().tolist())
                value = w.kept(f"vc_bench_{facet}", st.selectbox(
                    facet, values, **w.choice(f"vc_bench_{facet}", values)))
                bench = bench[bench[facet] == value]
        f1, f2 = figures.bench_figures(bench)
        b1, b2 = st.columns(2)
        b1.plotly_chart(f1, key="vc_bench_speedup")
        b2.plotly_chart(f2, key="vc_bench_emitted")
        sizes = appdata.bench_sizes_text(bench, figures.bench_series(bench))
        st.caption("The x axis is the node budget; a series is one (builder, verifier) pair. "
                   + (f"Mean tree sizes (nodes a round's tree really held): {sizes}." if sizes else
                      "These rows record no tree sizes: a sampled builder's trees may hold fewer nodes than the "
                      "budget."))
        st.dataframe(bench, hide_index=True, key="vc_bench_table")
    for name, record in records.items():
        if record.rows and name not in plotted:
            with st.expander(f"{name}: {record.command}, {len(record.rows)} rows"):
                st.dataframe(pd.DataFrame(record.rows), hide_index=True, key=f"vc_result_{name}")
    if not records:
        st.info("No result files yet.")


def main() -> None:
    shared_ui.page_header("Verifier comparison", "Every verifier on the same tree, many independent draws each: the "
                          "exact ones must follow the exit law X and the bonus law; the naive ratio rule is the foil "
                          "the tests must catch. On sampled trees the proposal-ratio rules (rrs, block) run too, and "
                          "many rounds of fresh trees compare E[L] with E[1 + C].")
    state = room_ui.page_state(ComparisonSession)
    explorer = room_ui.page_state(ExplorerSession)  # the explorer's rounds, if it made or opened some (kept across reloads)
    source, studied = choose_tree(state, explorer)
    compact, record, sampled, w = studied.compact, studied.record, studied.sampled, state.widgets

    # what the rules that need a drawn tree may run on: the drawn rounds' builder, or a sampled tree whose
    # proposals are at hand; else None
    drawn_with = sampled.builder if sampled is not None else (
        compact.tree if not compact.approximate and compact.tree.sampled and compact.tree.draws.rows is not None
        else None)
    if drawn_with is not None:  # the rules divide by the q the tree was drawn from, at the temperature it was drawn at
        temperature = sampled.temperature if sampled is not None else float(record.temperature)
        if sampled is None:
            st.caption(f"A sampled tree ({record.builder}): studied at its round's T = {temperature:g}, the "
                       "temperature its children were drawn at, since rrs and block divide by that very q.")
    elif compact.approximate:
        st.warning("APPROXIMATE rows: traces store no node logits, so each p(.|v) is rebuilt from the children's "
                   "probabilities, the recorded top missing tokens and one '(other)' bucket, at T = 1 on the already "
                   "tempered probabilities. Exit law and 1 + C are unchanged; bonus laws are pooled.")
        temperature = 1.0
    else:  # the round's temperature (the example tree's is the sampling temperature); the rows are exact
        temperature = float(w.kept("vc_temp", st.number_input(
            "temperature", 0.0, 5.0, step=0.1, **w.args("vc_temp", float(record.temperature), within(0.0, 5.0)),
            help="the target rows are exact, so any temperature can be studied")))

    tree = compact.tree
    c1, c2, c3 = st.columns(3)
    n_draws = int(w.kept("vc_n", c1.number_input("draws per verifier", 1000, 2_000_000, step=10_000,
                                                 **w.args("vc_n", 100_000, within(1000, 2_000_000)))))
    seed = int(w.kept("vc_seed", c2.number_input("seed", 0, MAX_SEED, **w.args("vc_seed", 0,
                                                                                   within(0, MAX_SEED)))))
    options = rules_for(drawn_with) if drawn_with is not None else rules_on(frozenset())  # a fixed tree's
    names_key = "vc_names" if drawn_with is None else f"vc_names_{len(options)}"
    chosen = w.kept(names_key, c3.multiselect("verifiers", options, format_func=verifier_label,
                                              **w.args(names_key, list(options), among(options), param="default")))
    room_ui.check(room_ui.guarded.check_draws, n_draws)  # the server's cap (tight in a room)
    law = tree_law(state, source, studied, temperature)
    st.markdown(f"Tree of **{tree.size} nodes**, depth {tree.max_depth}; at T = {temperature:g}: "
                f"**1 + C = {law.flow.expected_length:.4f}** (optimal exact verifiers reach it; chain-only reaches "
                f"1 + the chain's P" + ("; rrs and block, exact only over the tree's draw, may exceed it on one "
                                        "tree)." if drawn_with is not None else ")."))
    # each rule's standing in its registry entry's words (on a drawn tree a foil's entry says what it is there)
    standing_words = {name: standing_text(name, temperature, drawn=drawn_with is not None) for name in options}
    if temperature == 0:
        st.info("At T = 0 the target's every row is one token with probability 1, so the naive ratio rule accepts a "
                "child exactly when it is that token (ratio ≥ 1) and never otherwise (ratio 0): it then follows the "
                "greedy path and its bonus is the argmax, the law of every exact verifier. It cannot be caught at "
                "T = 0; raise the temperature to see it fail. Greedy is optimal here, and so shares X.")
    else:
        for name in (name for name in chosen if get_rule(name).greedy):
            st.caption(f"{name} decodes the T = 0 target whatever the temperature: at T = {temperature:g} it is "
                       f"tested against its own law (the T = 0 exit), not against X, and its blocks are not samples "
                       f"of this target, so its mean block length is no rival to 1 + C.")
    key = (source, studied.key, float(temperature), n_draws, seed, tuple(chosen))
    settings = {"tree": studied.words, "temperature": f"{temperature:g}", "draws per verifier": f"{n_draws:,}",
                "seed": str(seed), "verifiers": ", ".join(chosen)}
    if st.button("▶ Run every verifier", type="primary", key="vc_run"):
        request = studio_comparison.DrawRequest(tuple(chosen), float(temperature), n_draws, seed)
        run_verifiers(state, request, studied, key, settings, drawn_with is not None, standing_words)

    if state.results is None:
        st.info("Press **Run every verifier** to draw.")
    else:
        if state.results.key != key:
            st.warning("The results shown were made with other settings: "
                       + "; ".join(changes(state.results, settings) or ["another tree"])
                       + ". Press **Run every verifier** to draw with the settings above.")
        show_results(state, state.results.value)

    if sampled is not None:
        sampled_view.across_rounds(state, sampled, chosen, seed, {n: standing_words[n] for n in chosen},
                                   live=source == sampled_view.LIVE_SOURCE)
    show_result_files(state)


main()
