"""Verifier comparison: every verifier on one recorded tree, many draws each, against the exit law."""

from __future__ import annotations

import sys
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
from explorer_state import ExplorerSession  # noqa: E402
from tevcore.engine.sampling import MAX_SEED  # noqa: E402
from tevcore.verify.laws import FOIL, OPTIMAL, bonus_pvalue, exit_law, exit_pvalue  # noqa: E402
from figures.common import top_shares  # noqa: E402
from tevcore.verify.registry import (get_rule, law_name, rule_law, rules_on, standing, standing_text,  # noqa: E402
                                     held_to_x, laws_held_to_text, verifier_label, x_law_label)
from tevcore.studio import comparison as studio_comparison, traces as studio_traces  # noqa: E402

shared_ui.page_header("Verifier comparison", "Every verifier on the same tree, many independent draws each: the "
                      "exact ones must follow the exit law X and the bonus law; the naive ratio rule is the foil "
                      "the tests must catch. On sampled trees the proposal-ratio rules (rrs, block) run too, and "
                      "many rounds of fresh trees compare E[L] with E[1 + C].")
ss = st.session_state
explorer = room_ui.page_state(ExplorerSession)  # the explorer's rounds, if it made or opened some (kept across reloads)


# ------------------------------------------------------------------ which tree
sources = ["example tree (toy target, exact rows)", sampled_view.SOURCE]
if explorer.records:
    sources.insert(0, "a round from the tree explorer")
    if explorer.is_live:  # a live generation: its context can be redrawn from
        sources.insert(3, sampled_view.LIVE_SOURCE)
sources.append("a round from a trace file")
source = st.radio("tree", sources, horizontal=True, key="vc_source")

compact = None
record = None
sampled = None  # the drawn rounds, for the sampled source
round_key = None  # what the round is, stable across reruns (the records of some sources are rebuilt on every rerun)
if source == "a round from the tree explorer":
    records = explorer.records
    index = int(st.number_input("round", 0, len(records) - 1, value=min(explorer.selected_round, len(records) - 1),
                                key="vc_round"))
    record = records[index]
    round_key = explorer.round_key(index)
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
elif source == "a round from a trace file":
    upload = st.file_uploader("trace file (.jsonl or .jsonl.gz)", type=["jsonl", "gz"], key="vc_upload")
    if upload is None:
        st.info("Upload a trace saved by the tree explorer or `python -m tevcore generate --out`.")
        st.stop()
    opened = ss.get("vc_trace")
    if opened is None or opened[0] != upload.file_id:  # read once per upload, not on every rerun
        try:
            with room_ui.seat() as asking:  # the server's byte caps, parsed in a compute-queue turn
                opened = ss.vc_trace = (upload.file_id, studio_traces.open_trace(
                    asking, room_ui.read_upload(upload.getvalue(), upload.name)))
        except (ValueError, OSError) as err:
            st.error(f"Could not open {upload.name}: {err}")
            st.stop()
    trace = opened[1]
    index = st.number_input("round", 0, len(trace.rounds) - 1, value=0, key="vc_trace_round")
    record = trace.rounds[int(index)]
    round_key = (upload.file_id, int(index))
    compact = appdata.approximate_round(record)
elif source == sampled_view.SOURCE:
    sampled, round_key, compact = sampled_view.choose_round(ss)
    record = round_key
elif source == sampled_view.LIVE_SOURCE:
    sampled, round_key, compact = sampled_view.choose_live_round(ss, explorer)
    record = round_key
else:
    c1, c2 = st.columns(2)
    example_budget = c1.number_input("example tree budget", 2, 128, 24, key="vc_ex_budget")
    example_seed = c2.number_input("example seed", 0, 10_000, 0, key="vc_ex_seed")
    record, logits = appdata.synthetic_record(budget=int(example_budget), seed=int(example_seed))
    round_key = ("example", int(example_budget), int(example_seed))
    texts = [f"t{i}" for i in range(logits.shape[-1])]
    compact = appdata.CompactRound(record.tree, logits, texts, approximate=False)

# what the rules that need a drawn tree may run on: the drawn rounds' builder, or a sampled tree whose proposals
# are at hand; else None
drawn_with = sampled.builder if sampled is not None else (
    compact.tree if not compact.approximate and compact.tree.sampled and compact.tree.draws.rows is not None
    else None)
if drawn_with is not None:  # the rules divide by the q the tree was drawn from, at the temperature it was drawn at
    temperature = sampled.temperature if sampled is not None else float(record.temperature)
    if sampled is None:
        st.caption(f"A sampled tree ({record.builder}): studied at its round's T = {temperature:g}, the temperature its "
                   "children were drawn at, since rrs and block divide by that very q.")
elif compact.approximate:
    st.warning("APPROXIMATE rows: traces store no node logits, so each p(.|v) is rebuilt from the children's "
               "probabilities, the recorded top missing tokens and one '(other)' bucket, at T = 1 on the already "
               "tempered probabilities. Exit law and 1 + C are unchanged; bonus laws are pooled.")
    temperature = 1.0
else:
    default_t = float(record.temperature)  # the round's (the example tree's is the sampling temperature)
    temperature = st.number_input("temperature", 0.0, 5.0, value=default_t, step=0.1, key="vc_temp",
                                  help="the target rows are exact, so any temperature can be studied")

tree, node_logits = compact.tree, compact.node_logits
c1, c2, c3 = st.columns(3)
n_draws = int(c1.number_input("draws per verifier", 1000, 2_000_000, 100_000, step=10_000, key="vc_n"))
seed = int(c2.number_input("seed", 0, MAX_SEED, 0, key="vc_seed"))
options = appdata.rules_for(drawn_with) if drawn_with is not None else rules_on(frozenset())  # a fixed tree's
chosen = c3.multiselect("verifiers", options, default=options, format_func=verifier_label,
                        key="vc_names" if drawn_with is None else f"vc_names_{len(options)}")
room_ui.check(room_ui.guarded.check_draws, n_draws)  # the server's cap (tight in a room)
try:
    law = exit_law(tree, node_logits, temperature)
except ValueError as err:
    st.error(f"The tree and its rows do not fit: {err}")
    st.stop()
st.markdown(f"Tree of **{tree.size} nodes**, depth {tree.max_depth}; at T = {temperature:g}: "
            f"**1 + C = {law.flow.expected_length:.4f}** (optimal exact verifiers reach it; chain-only reaches "
            f"1 + the chain's P" + ("; rrs and block, exact only over the tree's draw, may exceed it on one tree)."
                                    if drawn_with is not None else ")."))
# each rule's standing in its registry entry's words (on a drawn tree a foil's entry says what it is there)
STANDING_TEXT = {name: standing_text(name, temperature, drawn=drawn_with is not None) for name in options}
groups = {name: standing(name, temperature) for name in chosen}
if temperature == 0:
    st.info("At T = 0 the target's every row is one token with probability 1, so the naive ratio rule accepts a "
            "child exactly when it is that token (ratio ≥ 1) and never otherwise (ratio 0): it then follows the "
            "greedy path and its bonus is the argmax, the law of every exact verifier. It cannot be caught at "
            "T = 0; raise the temperature to see it fail. Greedy is optimal here, and so shares X.")
else:
    for name in (name for name in chosen if get_rule(name).greedy):
        st.caption(f"{name} decodes the T = 0 target whatever the temperature: at T = {temperature:g} it is tested "
                   f"against its own law (the T = 0 exit), not against X, and its blocks are not samples of this "
                   f"target, so its mean block length is no rival to 1 + C.")
signature = (source, round_key, float(temperature), n_draws, seed, tuple(chosen))


def own_law(name: str):
    """The law `name` is tested against: its own if exact (chain: the top-1 chain's; greedy: T = 0), X for the foil."""
    return rule_law(name, tree, node_logits, temperature)


if st.button("▶ Run every verifier", type="primary", key="vc_run"):
    with st.status(f"simulating {n_draws:,} verifications per verifier…", expanded=True) as status:
        bar = st.progress(0.0)
        with room_ui.seat() as asking:  # the draws take a compute-queue turn inside the service
            drawn = studio_comparison.draw_verifiers(
                asking, chosen, tree, node_logits, law.flow, temperature, n_draws, seed,
                progress=lambda done, total, name: bar.progress(done / max(total, 1),
                                                                text=f"{verifier_label(name)} done"))
        for name, why in drawn.failures.items():  # one verifier failing does not hide the others
            st.error(f"{verifier_label(name)} failed ({why})")
        status.update(label="simulation finished", state="complete", expanded=False)
    ss.vc_results = (signature, drawn.results, drawn.latencies)

stored = ss.get("vc_results")
if not stored or stored[0] != signature:
    st.info("Press **Run every verifier** to draw.")
else:
    _, results, latencies = stored
    labels = [f"{v} {figures.short(str(compact.vocab_texts[int(t)]), 8)}" if v else "0 root"
              for v, t in enumerate(tree.tokens.tolist())]
    freq = {name: r.exit_shares().numpy() for name, r in results.items()}
    rows = []
    for name, r in results.items():
        rule = own_law(name)
        rows.append({"verifier": verifier_label(name), f"at T = {temperature:g}": STANDING_TEXT[name],
                     "mean L": r.mean_emitted, "± s.e.": r.emitted_stderr,
                     "E[L] of its law": rule.expected_length,
                     "exit χ² p (vs its law)": exit_pvalue(r.exit_counts, rule),
                     "bonus χ² p (all exits, vs its law)": bonus_pvalue(r.bonus_counts, rule),
                     "decision latency (µs)": 1e6 * latencies.get(name, float("nan")),
                     f"simulated {r.n:,} draws (s)": r.seconds})
    table = pd.DataFrame(rows)
    st.subheader("Summary")
    st.dataframe(table, hide_index=True, key="vc_summary")
    st.caption("χ² compares each verifier's exit counts and bonus-given-exit counts with the law it must follow if "
               f"exact: {laws_held_to_text(list(results), temperature)}. Small cells are pooled (expected < 5). A tiny "
               "p-value for an exact verifier would be a bug; for the foil it is the test's power.")
    st.caption(f"Decision latency: one real verifier call on this same tree for every verifier, given the round's "
               f"target flow (as the decoding loop calls it), median of {studio_comparison.LATENCY_REPEATS} timed "
               "calls after one "
               f"warm-up call, wall clock (`tevcore.timing`). On a toy vocabulary the fixed per-call overhead "
               f"dominates; on a real vocabulary the bonus draw over V does. `python -m tevcore bench-verifiers` "
               f"measures it on real trees, with and without the flow handed in.")
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
            st.plotly_chart(figures.exit_law_figure(labels, own_law(n).exit_probs.numpy(), {n: freq[n]}, top=12,
                                                    law_name=law_name(n, temperature)), key=f"vc_exit_{n}")
    with right:
        st.markdown("**:red[Naive ratio rule — NOT exact]**" + (" (teaching foil)" if drawn_with is None else ""))
        for foil in foils:  # the rules whose registry standing is the foil's: tested against X, which they miss
            if drawn_with is not None:
                st.caption(STANDING_TEXT[foil])
            st.plotly_chart(figures.exit_law_figure(labels, law.exit_mass.numpy(), {foil: freq[foil]},
                                                    law_name=law_name(foil, temperature)), key=f"vc_exit_foil_{foil}")
        if not foils:
            st.caption("not selected")
    lengths = {n: r.length_shares().numpy() for n, r in results.items()}
    st.plotly_chart(figures.length_histogram_figure(lengths, law.flow.expected_length,
                                                    {n: r.mean_emitted for n, r in results.items()},
                                                    {n: STANDING_TEXT[n] for n in results}),
                    key="vc_lengths")
    # bonus law at one exit node
    order = np.argsort(-law.exit_mass.numpy(), kind="stable")
    exit_pick = st.selectbox("bonus distribution at exit node", [int(v) for v in order[:30]],
                             format_func=lambda v: f"{labels[v]} (X = {float(law.exit_mass[v]):.4f})",
                             key="vc_bonus_node")
    bonus = law.bonus_probs(exit_pick).numpy()
    top = np.argsort(-bonus, kind="stable")[:12]
    token_labels = [figures.short(str(compact.vocab_texts[int(t)]), 10) + f" #{int(t)}" for t in top] + ["(rest)"]
    law_row = top_shares(bonus, top)
    empirical, bonus_rows = {}, []
    for name, r in results.items():
        if exit_pick not in r.bonus_counts:
            continue
        bonus_rows.append({"verifier": verifier_label(name), "exits here": int(r.bonus_counts[exit_pick][1].sum()),
                           "bonus χ² p (vs its law)": bonus_pvalue(r.bonus_counts, own_law(name), nodes=[exit_pick])})
        if not held_to_x(name, temperature):
            continue  # its bonus law is its own: its p-value is in the table, not drawn on X's law
        empirical[name] = top_shares(r.bonus_shares(exit_pick, bonus.shape[0]).numpy(), top)
    st.plotly_chart(figures.bonus_figure(token_labels, law_row, empirical, labels[exit_pick],
                                         law_name=f"bonus law: p(.|exit) at T = {temperature:g}, children masked"),
                    key="vc_bonus")
    if bonus_rows:
        st.dataframe(pd.DataFrame(bonus_rows), hide_index=True, key="vc_bonus_table")
    st.plotly_chart(figures.latency_figure(latencies), key="vc_latency")
    if drawn_with is not None:
        sampled_view.tree_against_rrs(results, labels, law, own_law("rrs") if "rrs" in results else None)

if sampled is not None:
    sampled_view.across_rounds(ss, sampled, chosen, seed, {n: STANDING_TEXT[n] for n in chosen},
                               live=source == sampled_view.LIVE_SOURCE)

# ------------------------------------------------------------------ end to end
st.divider()
st.subheader("End to end: benchmark results")
st.caption("Result files of the measuring commands (`bench`, `bench-verifiers`, `rounds-at-context`, "
           "`eval-drafter --json`, `compare`, the GPU proof): each with the run's meta block and its rows; "
           "bench's speculative rows draw the figures.")
uploads = st.file_uploader("result files", type=["json"], accept_multiple_files=True, key="vc_bench_upload")
folder = room_ui.space().folder if room_ui.in_room() else Path(  # a room: no server path is typed
    st.text_input("or read every .json in a folder", value="results", key="vc_bench_folder"))
records = {}
for up in uploads or []:
    try:
        records[up.name] = appdata.result_file(room_ui.read_upload(up.getvalue(), up.name).data, up.name)
    except ValueError as err:
        st.error(str(err))
if folder.is_dir():
    for path in sorted(folder.glob("*.json")):
        try:
            records[path.name] = appdata.result_file(room_ui.read_file(path, str(path)).data, str(path))
        except (ValueError, OSError) as err:
            st.warning(f"{path}: {err}")
if records:
    st.dataframe(appdata.runs_frame(records), hide_index=True, key="vc_bench_runs")
bench = appdata.bench_rows(records)
plotted = set(bench.get("file", []))
if not bench.empty:
    for facet in ("dataset", "temperature"):
        if facet in bench and bench[facet].nunique() > 1:
            value = st.selectbox(facet, sorted(bench[facet].dropna().unique().tolist()), key=f"vc_bench_{facet}")
            bench = bench[bench[facet] == value]
    f1, f2 = figures.bench_figures(bench)
    b1, b2 = st.columns(2)
    b1.plotly_chart(f1, key="vc_bench_speedup")
    b2.plotly_chart(f2, key="vc_bench_emitted")
    sizes = appdata.bench_sizes_text(bench, figures.bench_series(bench))
    st.caption("The x axis is the node budget; a series is one (builder, verifier) pair. "
               + (f"Mean tree sizes (nodes a round's tree really held): {sizes}." if sizes else
                  "These rows record no tree sizes: a sampled builder's trees may hold fewer nodes than the budget."))
    st.dataframe(bench, hide_index=True, key="vc_bench_table")
for name, record in records.items():
    if record.rows and name not in plotted:
        with st.expander(f"{name}: {record.command}, {len(record.rows)} rows"):
            st.dataframe(pd.DataFrame(record.rows), hide_index=True, key=f"vc_result_{name}")
if not records:
    st.info("No result files yet.")
