"""The ExitTrain page's Compare tab: E per budget of the drafters the user picked, and a paired comparison.

The picks are the user's: a checkpoint a run writes meanwhile is offered, never swapped in. The picks, the
settings and the last results live in the page's state object (`ExitTrainSession`), so a page switch or a reload
finds them; a result made with other settings than the current ones says so. The numbers come from the studio's
drafter comparison (`tevcore.studio.drafter_compare`), in a compute-queue turn, through the app's cached target and
proposers (`shared_ui`).
"""

from __future__ import annotations

from pathlib import Path

import figures
import inputs
import room_ui
import shared_ui
import streamlit as st

from tevcore.parsing import budget_or_chain, comma_list
from tevcore.room.limits import CapExceeded
from tevcore.studio import drafter_compare
from tevcore.studio.drafter_compare import DrafterEvaluation, EvalRequest, PairedComparison, PairedRequest
from tevcore.studio.training import DEFAULT_DRAFTER, default_comparison, identical_weights, list_runs, missing
from tevcore.studio.training_state import CompareForm, ExitTrainSession, PairedForm

ss = st.session_state


def load_target():
    return shared_ui.get_target(shared_ui.target_spec())


def load_proposer(spec: str):
    return shared_ui.get_proposer(spec, shared_ui.target_spec())


def evaluate(request: EvalRequest) -> DrafterEvaluation:
    """E per budget of each picked drafter in each variant (alone, + lookup): the real decoding loop, TEV."""
    with st.status("evaluating the picked drafters (the real decoding loop, TEV verifier)…", expanded=True) as status:
        bar = st.progress(0.0)
        with room_ui.seat() as seat:
            found = drafter_compare.evaluate_drafters(
                seat, request, load_target, load_proposer,
                progress=lambda done, total, what: bar.progress(done / total, text=what))
        status.update(label="evaluation finished" + (" with errors (below)" if found.errors else ""),
                      state="error" if found.errors else "complete", expanded=False)
    return found


def opening(key: str, kept: list[str]) -> list[str] | None:
    """The value a box opens at: the kept one when streamlit forgot the box (another page was shown), else none (the
    box holds its own value, or the one the page just set in it)."""
    return None if key in ss else kept


def other_settings(shown: EvalRequest | PairedRequest, current: EvalRequest | PairedRequest | None,
                   names: dict[str, str]) -> str:
    """The settings a shown result was made with that differ from the current request's ('' when none)."""
    def text(value) -> str:
        return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)

    if current is None:
        return ""
    return "; ".join(f"{label} {text(getattr(shown, name))} (now {text(getattr(current, name))})"
                     for name, label in names.items() if getattr(shown, name) != getattr(current, name))


def paired_section(options: list[str], paired: PairedForm) -> None:
    """Two drafters at the same round starts (`eval-drafter --compare`), and how many prompts its s.e. needs."""
    st.markdown("**Paired comparison** (`eval-drafter --compare`): both drafters draft from the same contexts of one "
                "decode, so their difference is not blurred by each decode sampling its own text.")
    if len(options) < 2:
        st.info("A paired comparison needs two drafters: train a checkpoint, or name another drafter folder above.")
        return
    q1, q2 = st.columns(2)
    committed = str(DEFAULT_DRAFTER)
    a_default = options.index(committed) if committed in options else 0
    a_index = options.index(paired.baseline) if paired.baseline in options else a_default
    b_index = options.index(paired.other) if paired.other in options else (1 if a_index == 0 else 0)
    base = paired.baseline = q1.selectbox("A (baseline)", options, index=a_index, key="et_pair_a")
    other = paired.other = q2.selectbox("B", options, index=b_index, key="et_pair_b")
    q3, q4, q5, q6, q7, q8 = st.columns(6)
    budgets_text = paired.budgets = q3.text_input("budgets (paired)", value=paired.budgets, key="et_pair_budgets")
    per_set = paired.per_set = q4.number_input("prompts per set (paired)", value=paired.per_set, key="et_pair_n")
    temp = paired.temperature = q5.number_input("temperature (paired)", value=paired.temperature, step=0.1,
                                                key="et_pair_temp")
    tokens = paired.max_new_tokens = q6.number_input("max new tokens (paired)", value=paired.max_new_tokens, step=8,
                                                     key="et_pair_tokens")
    resolution = paired.resolution = q7.number_input("δ: smallest gain to resolve (% of E(A))",
                                                     value=paired.resolution, step=0.5, key="et_pair_delta")
    lookup = paired.lookup = q8.checkbox("with the context lookup", value=paired.lookup, key="et_pair_lookup")
    problems = [p for p in (
        inputs.range_problem("prompts per set", per_set, inputs.NumberRange(2, 80, integer=True)),
        inputs.range_problem("temperature", temp, inputs.decode_range("temperature", 5.0)),
        inputs.range_problem("max new tokens", tokens, inputs.decode_range("max_new_tokens", 1024)),
        inputs.range_problem("δ", resolution, inputs.NumberRange(0.01, 100, integer=False))) if p]
    request = None
    try:
        budgets = comma_list(budgets_text, int, "budgets (positive integers)")
        request = PairedRequest(base, other, tuple(budgets), int(per_set), float(temp), int(tokens), bool(lookup))
    except ValueError as err:
        problems.append(str(err))
    for problem in problems:
        st.error(f"Refused: {problem}.")
    if not problems:
        st.code(" ".join(request.command()), language="bash")
        if st.button("Compare A and B (paired)", key="et_pair_run"):
            try:
                with room_ui.seat() as seat, st.spinner("paired comparison: one decode, both drafters scored at "
                                                        "every position…"):
                    paired.result = drafter_compare.compare_paired(seat, request, load_target, load_proposer)
            except CapExceeded as err:  # before any wait
                room_ui.refused(err)
            except Exception as err:  # a damaged drafter or a missing prompt set: said, not raised
                st.error(f"The paired comparison failed ({type(err).__name__}): {err}")
    shown: PairedComparison | None = paired.result
    if shown is not None:
        st.caption(f"A = {shown.request.baseline} · B = {shown.request.other}")
        changed = other_settings(shown.request, None if problems else request, {
            "baseline": "A", "other": "B", "budgets": "budgets", "per_set": "prompts per set",
            "temperature": "temperature", "max_new_tokens": "max new tokens", "lookup": "with the lookup"})
        if changed:
            st.warning(f"The paired table came from other settings: {changed}. Compare again to measure these.")
        st.dataframe(shown.table(float(resolution) / 100), hide_index=True, key="et_pair_table")
        st.caption("Prompts needed: the standard error is clustered by prompt (a prompt's positions share its text), "
                   "so it falls as 1/√prompts; from the per-prompt spread just measured, n = prompts × (s.e. / "
                   "wanted)², per set. 'for s.e. ≤ δ/2': a true gain of δ then stands two standard errors from "
                   "zero; 'to resolve B - A': the same for the difference measured here.")


def compare_tab(runs_root: Path, session: ExitTrainSession) -> None:
    """The Compare tab: the user's picks, E per budget of each (alone and + lookup), and the paired comparison."""
    form: CompareForm = session.compare
    runs_now = list_runs(runs_root)
    # a new runs folder starts from its newest pair; the picks are set in the box itself (it may be on the screen)
    if form.root != str(runs_root):
        form.root = str(runs_root)
        form.picks = ss.et_cmp = default_comparison(runs_now)
    if st.button("↺ newest checkpoint vs the committed drafter", key="et_cmp_newest"):
        form.picks = ss.et_cmp = default_comparison(runs_now)
    if not room_ui.in_room():  # a room: no server path is typed
        form.extra = st.text_input("another drafter folder (optional)", value=form.extra, key="et_cmp_extra")
    extra = "" if room_ui.in_room() else form.extra
    found = [str(p) for r in runs_now for p in r.checkpoints] + default_comparison([])
    found += [extra.strip()] if extra.strip() else []
    # the user's picks stay, even when gone (those kept, and those the box holds now)
    all_ckpts = list(dict.fromkeys(found + form.picks + list(ss.get("et_cmp", []))))
    picks = form.picks = st.multiselect(
        "checkpoints", all_ckpts, default=opening("et_cmp", form.picks), key="et_cmp",
        help="your picks stay as they are while runs write new checkpoints; ↺ takes the newest checkpoint against "
             "the committed default drafter")
    gone = missing(picks)
    for path in gone:
        st.error(f"{path} no longer exists (a run keeps only its newest checkpoint): pick another.")
    same = identical_weights(picks)
    for first, second in same:
        st.error(f"{second} has exactly the same weights as {first} (identical files): comparing them shows one "
                 "drafter twice. Pick two different drafters.")
    e1, e2, e3, e4, e5 = st.columns(5)
    budgets_text = form.budgets = e1.text_input("budgets", value=form.budgets, key="et_cmp_budgets")
    per_set = form.per_set = e2.number_input("held-out prompts per set", value=form.per_set, key="et_cmp_n")
    cmp_temp = form.temperature = e3.number_input("temperature", value=form.temperature, step=0.1, key="et_cmp_temp")
    cmp_tokens = form.max_new_tokens = e4.number_input("max new tokens", value=form.max_new_tokens, step=8,
                                                       key="et_cmp_tokens")
    variants = form.variants = e5.multiselect(
        "proposer", list(drafter_compare.VARIANTS), default=[v for v in form.variants if v in drafter_compare.VARIANTS],
        key="et_cmp_variants", help="each drafter alone, and with the context lookup mixed in (the explorer's default "
                                    "proposer)")
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
    request = EvalRequest(tuple(picks), tuple(variants), tuple(budgets), int(per_set), float(cmp_temp),
                          int(cmp_tokens)) if ready else None
    if st.button("Evaluate E per budget", disabled=not ready, key="et_cmp_run"):
        try:
            form.evaluation = evaluate(request)
        except CapExceeded as err:  # before any wait
            room_ui.refused(err)
        for message in form.evaluation.errors:  # outside the collapsed box, where they are seen
            st.error(message)
    shown = form.evaluation
    if shown is not None and len(shown.rows):
        evaluated = list(dict.fromkeys(shown.rows["checkpoint"]))
        st.caption("evaluated: " + " · ".join(f"`{path}`" for path in evaluated))
        changed = other_settings(shown.request, request, {
            "drafters": "drafters", "variants": "proposers", "budgets": "budgets", "per_set": "prompts per set",
            "temperature": "temperature", "max_new_tokens": "max new tokens"})
        if changed:
            st.warning(f"The figure and table came from other settings: {changed}. Evaluate again to measure these.")
        st.plotly_chart(figures.eval_figure(shown.rows), key="et_eval_fig")
        st.dataframe(shown.rows, hide_index=True, key="et_eval_table")
    st.divider()
    paired_section(all_ckpts, session.paired)
