"""ExitTrain: configure, launch (in the background) and watch drafter training runs; compare checkpoints."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402
from tevcore.flags import budget_or_chain, comma_list  # noqa: E402
from tevcore.train.losses import TREE_WEIGHTS  # noqa: E402

import figures  # noqa: E402
import trainruns  # noqa: E402

shared_ui.page_header("ExitTrain", "Train the drafter on the trees it really builds: the tree loss weights each "
                      "node by the target's flow (floored P(v), or X(v)·depth(v)). Training runs as a background "
                      "process (`python -m tevcore train`) writing into a run folder; this page only reads it.")
ss = st.session_state


@st.cache_resource
def started_processes() -> dict:
    """Run folder -> Popen of the trainings this app process started (to refuse double starts at once)."""
    return {}


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


runs_root = Path(st.text_input("runs folder", value="runs", key="et_root"))

tab_new, tab_runs, tab_compare = st.tabs(["New run", "Runs", "Compare checkpoints"])

# ------------------------------------------------------------------ new run
with tab_new:
    sets = trainruns.data_sets(runs_root)
    c1, c2, c3 = st.columns(3)
    name = c1.text_input("run name (folder under the runs folder)", value=f"exittrain-{time.strftime('%m%d-%H%M')}",
                         key="et_name")
    data = c2.selectbox("distillation set", [str(p) for p in sets] or ["(none found: build one with "
                                                                      "`python -m tevcore build-data`)"],
                        key="et_data")
    steps = c3.number_input("steps", value=200, step=50, key="et_steps")
    c4, c5, c6, c7 = st.columns(4)
    lam = c4.number_input("λ (tree loss weight; 0 = plain distillation)", value=0.1, step=0.05,
                          key="et_lambda")
    weight = c5.selectbox("weight type", list(TREE_WEIGHTS), key="et_weight",
                          help="path: P(v) with every edge floored at α; exit: X(v)·depth(v); "
                               "flow: P(v) times the target's whole row at v, so the tokens the tree lacked count too")
    alpha = c6.number_input("α (edge floor)", value=0.01, step=0.005, format="%.4f", key="et_alpha")
    tree_budget = c7.number_input("tree budget", value=8, key="et_budget")
    c8, c9, c10, c11, c12 = st.columns(5)
    anchors = c8.number_input("tree anchors per step", value=8, key="et_anchors",
                              help="anchors per step that get the tree loss (needed when λ > 0)")
    batch = c9.number_input("batch size (anchors)", value=64, key="et_batch")
    shards = c10.number_input("data size (shards; 0 = all)", value=8, key="et_shards")
    every = c11.number_input("checkpoint every (steps)", value=50, key="et_every")
    threads = c12.number_input("CPU threads", value=1, key="et_threads")
    values = {"data": data if sets else None, "steps": int(steps), "tree_lambda": float(lam), "tree_weight": weight,
              "tree_alpha": float(alpha), "tree_budget": int(tree_budget), "tree_anchors": int(anchors),
              "batch_size": int(batch), "max_shards": int(shards) if shards else None,
              "checkpoint_every": int(every), "threads": int(threads)}
    folder = runs_root / name.strip()
    command, command_error = None, None
    if not name.strip() or "/" in name or name.strip().startswith("."):
        command_error = "Give the run a plain folder name."
    elif not sets:
        command_error = f"No distillation set under {runs_root}: build one first (`python -m tevcore build-data`)."
    else:
        try:
            command = trainruns.build_command(folder, values)
        except ValueError as err:
            command_error = f"Cannot build the training command: {err}"
    if command_error:
        st.error(command_error)
    elif command:
        ok_plan, plan_text = trainruns.plan(command)
        st.markdown("**Plan (the CLI's dry run)**")
        if ok_plan:
            st.code(plan_text, language="text")
        else:
            st.error(f"The training CLI refuses these settings: {plan_text}")
            command = None
    if command:
        st.code("python " + " ".join(command[1:]), language="bash")
    if st.button("▶ Start training", type="primary", disabled=command is None, key="et_start"):
        procs = started_processes()
        reason = trainruns.busy_reason(folder, procs.get(str(folder.resolve())))
        if reason:
            st.error(f"Refused: {reason}.")
        else:
            try:
                proc = trainruns.launch(command, folder)
            except OSError as err:
                st.error(f"Could not start the training process: {err}")
            else:
                procs[str(folder.resolve())] = proc
                ss.et_watch = str(folder)
                st.success(f"Started process {proc.pid}, writing into {folder} (log: {folder / trainruns.LOG_NAME}). "
                           "Follow it in the Runs tab.")

# ------------------------------------------------------------------ runs
with tab_runs:
    runs = trainruns.list_runs(runs_root)
    if not runs:
        st.info(f"No training runs under {runs_root} yet.")
    else:
        st.dataframe(trainruns.runs_table(runs), hide_index=True, key="et_runs_table")
        names = [r.folder.name for r in runs]
        default = Path(ss.get("et_watch", "")).name
        pick = st.selectbox("run", names, index=names.index(default) if default in names else 0, key="et_pick")
        chosen = runs[names.index(pick)]

        def show_progress(folder: Path) -> None:
            info = trainruns.run_info(folder)
            label = (f"{info.state}: step {info.step}/{info.total} · elapsed "
                     f"{fmt_seconds((info.updated or 0) - (info.started or 0) if info.started else None)} · "
                     f"ETA {fmt_seconds(info.eta_seconds)}")
            st.progress(info.fraction, text=label)
            if info.error:
                st.error(f"{info.folder.name}: {info.error}")
            metrics = trainruns.metrics_frame(folder)
            if len(metrics):
                st.plotly_chart(figures.training_curves_figure(metrics), key=f"et_curves_{folder.name}")
                last = metrics.iloc[-1].dropna().to_dict()
                st.caption(" · ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                      for k, v in last.items()))
            tail = trainruns.log_tail(folder)
            if tail:
                with st.expander("log (last lines)"):
                    st.code(tail)

        live = chosen.running
        st.fragment(run_every=2.0 if live else None)(show_progress)(chosen.folder)
        if live:
            st.caption("refreshing every 2 s while the run is training")
        procs = started_processes()
        own = procs.get(str(chosen.folder.resolve()))
        r1, r2 = st.columns(2)
        if chosen.resumable:
            if r1.button("↻ Resume this run", key="et_resume"):
                reason = trainruns.busy_reason(chosen.folder, own)
                if reason:
                    st.error(f"Refused: {reason}.")
                else:
                    try:
                        cmd = trainruns.build_command(chosen.folder, {"config": chosen.folder / "config.json"})
                        procs[str(chosen.folder.resolve())] = trainruns.launch(cmd, chosen.folder)
                        st.success("resumed")
                    except (ValueError, OSError) as err:
                        st.error(f"Could not resume: {err}")
        if own is not None and own.poll() is None and r2.button("■ Stop (started from this app)", key="et_stop"):
            own.terminate()
            st.info(f"sent a stop signal to process {own.pid}")
        if chosen.checkpoints:
            ck = st.selectbox("checkpoint", [str(p) for p in chosen.checkpoints], key="et_ckpt")
            if st.button("Make this the explorer's drafter", key="et_activate"):
                ss.active_drafter = ck
                st.success(f"The tree explorer will now offer {ck} as its drafter.")
        else:
            st.caption("no checkpoint yet")
    if ss.get("active_drafter"):
        st.caption(f"active drafter of the explorer: {ss.active_drafter}")

# ------------------------------------------------------------------ compare checkpoints
with tab_compare:
    all_ckpts = [str(p) for r in trainruns.list_runs(runs_root) for p in r.checkpoints]
    extra = st.text_input("another drafter folder (optional)", value="", key="et_cmp_extra")
    if extra.strip():
        all_ckpts.append(extra.strip())
    picks = st.multiselect("checkpoints", all_ckpts, default=all_ckpts[-2:], key="et_cmp")
    e1, e2, e3, e4 = st.columns(4)
    budgets_text = e1.text_input("budgets", value="4,8,16", key="et_cmp_budgets")
    per_set = e2.number_input("held-out prompts per set", value=1, key="et_cmp_n")
    cmp_temp = e3.number_input("temperature", value=1.0, step=0.1, key="et_cmp_temp")
    cmp_tokens = e4.number_input("max new tokens", value=32, step=8, key="et_cmp_tokens")
    try:
        budgets = comma_list(budgets_text, budget_or_chain, "budgets (positive integers or 'chain')")
    except ValueError as err:
        st.error(str(err))
        budgets = []
    if st.button("Evaluate E per budget", disabled=not picks or not budgets, key="et_cmp_run"):
        from tevcore.train import eval as engine_eval

        rows = []
        with st.status("evaluating checkpoints (the real decoding loop, TEV verifier)…", expanded=True) as status:
            bar = st.progress(0.0)
            try:
                target = shared_ui.get_target(shared_ui.target_spec())
                prompts = engine_eval.eval_prompts(engine_eval.MIX, int(per_set))
            except (ValueError, OSError) as err:  # a missing model or prompt file
                st.error(f"Could not prepare the evaluation: {err}")
                prompts = []
            jobs = [(path, b) for path in picks for b in budgets] if prompts else []
            for i, (path, budget) in enumerate(jobs):
                try:
                    proposer = shared_ui.get_proposer(path, shared_ui.target_spec())
                    cell = engine_eval.evaluate(target, proposer, prompts, float(cmp_temp), [budget],
                                               int(cmp_tokens), 0, progress=False)[0]
                    rows.append({"checkpoint": path, "budget": budget if budget != "chain" else 1,
                                 "budget label": str(budget), "E": cell.expected_length,
                                 "E s.e.": cell.expected_length_se,
                                 "block length": cell.block_length, "rounds": cell.rounds})
                except Exception as err:  # a damaged checkpoint is reported, the others still run
                    st.error(f"{path} ({type(err).__name__}): {err}")
                bar.progress((i + 1) / len(jobs), text=f"{Path(path).name}, budget {budget}")
            status.update(label="evaluation finished", state="complete", expanded=False)
        ss.et_eval_rows = pd.DataFrame(rows)
    if ss.get("et_eval_rows") is not None and len(ss.et_eval_rows):
        st.plotly_chart(figures.eval_figure(ss.et_eval_rows), key="et_eval_fig")
        st.dataframe(ss.et_eval_rows, hide_index=True, key="et_eval_table")
