"""The ExitTrain page's Compare tab: E per budget of the drafters the user picked, and a paired comparison.

The picks are the user's: a checkpoint a run writes meanwhile is offered, never swapped in. Numbers come
from the engine (`tevcore.train.eval`) through the app's cached target and proposers (`shared_ui`).
"""

from __future__ import annotations

from pathlib import Path

import drafter_compare
import figures
import inputs
import room_ui
import pandas as pd
import shared_ui
import streamlit as st
import trainruns

from tevcore.config import SAMPLING_TEMPERATURE
from tevcore.parsing import budget_or_chain, comma_list
from tevcore.train.eval import prompt_sets
from tevcore.train.runs import list_runs

ss = st.session_state


def evaluate_picks(picks: list[str], variants: list[str], budgets: list, per_set: int, temperature: float,
                   max_new_tokens: int) -> tuple[pd.DataFrame, list[str]]:
    """E per budget of each picked drafter in each variant (alone, + lookup): the real decoding loop, TEV."""
    from tevcore.train import eval as engine_eval

    rows, errors = [], []
    with st.status("evaluating the picked drafters (the real decoding loop, TEV verifier)…", expanded=True) as status:
        bar = st.progress(0.0)
        try:
            target = shared_ui.get_target(shared_ui.target_spec())
            prompts = engine_eval.eval_prompts(engine_eval.MIX, per_set)
        except (ValueError, OSError) as err:  # a missing model or prompt file
            errors.append(f"Could not prepare the evaluation: {err}")
            prompts = []
        jobs = [(job, b) for job in drafter_compare.eval_specs(picks, variants) for b in budgets] if prompts else []
        for i, ((path, variant, spec), budget) in enumerate(jobs):
            try:
                proposer = shared_ui.get_proposer(spec, shared_ui.target_spec())
                cell = engine_eval.evaluate(target, proposer, prompts, temperature, [budget], max_new_tokens, 0,
                                            progress=False)[0]
                rows.append({"checkpoint": path, "proposer": variant, "budget": budget if budget != "chain" else 1,
                             "budget label": str(budget), "E": cell.expected_length, "E s.e.": cell.expected_length_se,
                             "mean L": cell.mean_emitted, "rounds": cell.rounds})
            except Exception as err:  # a damaged checkpoint is reported, the others still run
                errors.append(f"{path} {variant} ({type(err).__name__}): {err}")
            bar.progress((i + 1) / len(jobs), text=f"{Path(path).name} {variant}, budget {budget}")
        status.update(label="evaluation finished" + (" with errors (below)" if errors else ""),
                      state="error" if errors else "complete", expanded=False)
    return pd.DataFrame(rows), errors


def paired_section(options: list[str]) -> None:
    """Two drafters at the same round starts (`eval-drafter --compare`), and how many prompts its s.e. needs."""
    st.markdown("**Paired comparison** (`eval-drafter --compare`): both drafters draft from the same contexts of one "
                "decode, so their difference is not blurred by each decode sampling its own text.")
    if len(options) < 2:
        st.info("A paired comparison needs two drafters: train a checkpoint, or name another drafter folder above.")
        return
    q1, q2 = st.columns(2)
    committed = str(trainruns.DEFAULT_DRAFTER)
    a_index = options.index(committed) if committed in options else 0
    base = q1.selectbox("A (baseline)", options, index=a_index, key="et_pair_a")
    other = q2.selectbox("B", options, index=1 if a_index == 0 else 0, key="et_pair_b")
    q3, q4, q5, q6, q7, q8 = st.columns(6)
    budgets_text = q3.text_input("budgets (paired)", value="8,16", key="et_pair_budgets")
    per_set = q4.number_input("prompts per set (paired)", value=2, key="et_pair_n")
    temp = q5.number_input("temperature (paired)", value=SAMPLING_TEMPERATURE, step=0.1, key="et_pair_temp")
    tokens = q6.number_input("max new tokens (paired)", value=32, step=8, key="et_pair_tokens")
    resolution = q7.number_input("δ: smallest gain to resolve (% of E(A))", value=1.0, step=0.5, key="et_pair_delta")
    lookup = q8.checkbox("with the context lookup", value=True, key="et_pair_lookup")
    problems = [p for p in (
        inputs.range_problem("prompts per set", per_set, inputs.NumberRange(2, 80, integer=True)),
        inputs.range_problem("temperature", temp, inputs.decode_range("temperature", 5.0)),
        inputs.range_problem("max new tokens", tokens, inputs.decode_range("max_new_tokens", 1024)),
        inputs.range_problem("δ", resolution, inputs.NumberRange(0.01, 100, integer=False))) if p]
    try:
        budgets = comma_list(budgets_text, int, "budgets (positive integers)")
        if any(b < 1 for b in budgets):
            raise ValueError("budgets must be positive integers")
    except ValueError as err:
        problems.append(str(err))
    if base == other:
        problems.append("A and B are the same drafter")
    for problem in problems:
        st.error(f"Refused: {problem}.")
    if problems:
        return
    command = drafter_compare.paired_command(base, other, budgets, int(per_set), float(temp), int(tokens), lookup)
    st.code(" ".join(command), language="bash")
    if st.button("Compare A and B (paired)", key="et_pair_run"):
        room_ui.check(room_ui.guarded.check_compare, budgets, int(per_set), int(tokens), 2)
        from tevcore.train import eval as engine_eval

        sets = prompt_sets(float(temp))
        suffix = drafter_compare.VARIANTS["+ lookup"] if lookup else ""
        with room_ui.compute_turn(), st.spinner("paired comparison: one decode, both drafters scored at every "
                                                 "position…"):
            try:
                target = shared_ui.get_target(shared_ui.target_spec())
                proposers = [shared_ui.get_proposer(p + suffix, shared_ui.target_spec()) for p in (base, other)]
                cells = engine_eval.paired_coverage(target, *proposers, engine_eval.eval_prompts(sets, int(per_set)),
                                                    float(temp), budgets, int(tokens), 0, progress=False)
            except Exception as err:  # a damaged drafter or a missing prompt set: said, not raised
                st.error(f"The paired comparison failed ({type(err).__name__}): {err}")
                return
        ss.et_pair = {"A": base, "B": other, "table": drafter_compare.paired_table(cells, resolution / 100, len(sets))}
    if ss.get("et_pair"):
        st.caption(f"A = {ss.et_pair['A']} · B = {ss.et_pair['B']}")
        st.dataframe(ss.et_pair["table"], hide_index=True, key="et_pair_table")
        st.caption("Prompts needed: the standard error is clustered by prompt (a prompt's positions share its text), "
                   "so it falls as 1/√prompts; from the per-prompt spread just measured, n = prompts × (s.e. / "
                   "wanted)², per set. 'for s.e. ≤ δ/2': a true gain of δ then stands two standard errors from "
                   "zero; 'to resolve B - A': the same for the difference measured here.")


def compare_tab(runs_root: Path) -> None:
    """The Compare tab: the user's picks, E per budget of each (alone and + lookup), and the paired comparison."""
    runs_now = list_runs(runs_root)
    if ss.get("et_cmp_root") != str(runs_root):  # a new runs folder: start from its newest pair
        ss.et_cmp_root = str(runs_root)
        ss.et_cmp = trainruns.default_comparison(runs_now)
    if st.button("↺ newest checkpoint vs the committed drafter", key="et_cmp_newest"):
        ss.et_cmp = trainruns.default_comparison(runs_now)
    extra = "" if room_ui.in_room() else st.text_input("another drafter folder (optional)", value="",
                                                       key="et_cmp_extra")  # a room: no server path is typed
    found = [str(p) for r in runs_now for p in r.checkpoints] + trainruns.default_comparison([])
    found += [extra.strip()] if extra.strip() else []
    all_ckpts = list(dict.fromkeys(found + list(ss.get("et_cmp", []))))  # the user's picks stay, even when gone
    picks = st.multiselect("checkpoints", all_ckpts, key="et_cmp",
                           help="your picks stay as they are while runs write new checkpoints; ↺ takes the newest "
                                "checkpoint against the committed default drafter")
    gone = drafter_compare.missing(picks)
    for path in gone:
        st.error(f"{path} no longer exists (a run keeps only its newest checkpoint): pick another.")
    same = trainruns.identical_weights(picks)
    for first, second in same:
        st.error(f"{second} has exactly the same weights as {first} (identical files): comparing them shows one "
                 "drafter twice. Pick two different drafters.")
    e1, e2, e3, e4, e5 = st.columns(5)
    budgets_text = e1.text_input("budgets", value="4,8,16", key="et_cmp_budgets")
    per_set = e2.number_input("held-out prompts per set", value=1, key="et_cmp_n")
    cmp_temp = e3.number_input("temperature", value=SAMPLING_TEMPERATURE, step=0.1, key="et_cmp_temp")
    cmp_tokens = e4.number_input("max new tokens", value=32, step=8, key="et_cmp_tokens")
    variants = e5.multiselect("proposer", list(drafter_compare.VARIANTS), default=list(drafter_compare.VARIANTS),
                              key="et_cmp_variants", help="each drafter alone, and with the context lookup mixed in "
                                                          "(the explorer's default proposer)")
    problems = [problem for problem in (
        inputs.range_problem("held-out prompts per set", per_set, inputs.NumberRange(1, 50, integer=True)),
        inputs.range_problem("temperature", cmp_temp, inputs.decode_range("temperature", 5.0)),
        inputs.range_problem("max new tokens", cmp_tokens, inputs.decode_range("max_new_tokens", 1024)))
        if problem]
    for problem in problems:
        st.error(f"Refused: {problem}.")
    try:
        budgets = comma_list(budgets_text, budget_or_chain, "budgets (positive integers or 'chain')")
    except ValueError as err:
        st.error(str(err))
        budgets = []
    ready = bool(picks) and bool(budgets) and bool(variants) and not problems and not same and not gone
    if st.button("Evaluate E per budget", disabled=not ready, key="et_cmp_run"):
        room_ui.check(room_ui.guarded.check_compare, budgets, int(per_set), int(cmp_tokens), len(picks))
        with room_ui.compute_turn():
            ss.et_eval_rows, errors = evaluate_picks(list(picks), list(variants), budgets, int(per_set),
                                                     float(cmp_temp), int(cmp_tokens))
        for message in errors:  # outside the collapsed box, where they are seen
            st.error(message)
    if ss.get("et_eval_rows") is not None and len(ss.et_eval_rows):
        evaluated = list(dict.fromkeys(ss.et_eval_rows["checkpoint"]))
        st.caption("evaluated: " + " · ".join(f"`{path}`" for path in evaluated))
        st.plotly_chart(figures.eval_figure(ss.et_eval_rows), key="et_eval_fig")
        st.dataframe(ss.et_eval_rows, hide_index=True, key="et_eval_table")
    st.divider()
    paired_section(all_ckpts)
