"""ExitTrain: configure, launch (in the background) and watch drafter training runs; compare checkpoints."""

from __future__ import annotations

import sys
import time
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402
from tevcore.config import SAMPLING_TEMPERATURE  # noqa: E402
from tevcore.parsing import budget_or_chain, comma_list  # noqa: E402
from tevcore.train.config import TrainConfig  # noqa: E402
from tevcore.train.losses import TREE_WEIGHTS  # noqa: E402

import figures  # noqa: E402
import inputs  # noqa: E402
import trainruns  # noqa: E402

shared_ui.page_header("ExitTrain", "Train the drafter on the trees it really builds: the tree loss weights each "
                      "node by the target's flow (floored P(v), or X(v)·depth(v)). Training runs as a background "
                      "process (`python -m tevcore train`) writing into a run folder; this page only reads it.")
ss = st.session_state


REFRESH_SECONDS = 2.0
# the engine's own defaults where the page keeps them (steps, λ, α, anchors and checkpoints are ExitTrain's recipe)
TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}


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

# ------------------------------------------------------------------ a small data set, without a terminal
@st.fragment(run_every=REFRESH_SECONDS)
def show_data_build(folder: Path, shards: int) -> None:
    """Progress of a `build-data` started from this page (shards written / planned), read from the folder
    when this process holds no handle on the build (another session, a reload, a script run cut short)."""
    proc = started_processes().get(f"data:{folder.resolve()}")
    if proc is None and not (folder / trainruns.DATA_LOG).is_file():
        return
    done = trainruns.data_progress(folder)
    if proc is not None:
        code = proc.poll()  # also reaps the finished process
    else:
        code = 0 if done >= shards else None
    if code is None:
        st.progress(min(1.0, done / shards), text=f"building {folder.name}: {done}/{shards} shards")
    elif code == 0:
        if ss.get("et_data_ready") != str(folder):  # once: rerun the page so the new set is offered, and chosen
            ss.et_data_ready = str(folder)
            ss.et_data = str(folder)
            st.rerun(scope="app")
        st.success(f"{folder.name} is ready ({done} shards): it is the distillation set below.")
    else:
        st.error(f"build-data exited with status {code}; its log: {folder / trainruns.DATA_LOG}")


def data_build_form(root: Path, have_sets: bool) -> None:
    with st.expander("Build a small data set (the engine's `build-data`, in the background)", expanded=not have_sets):
        b1, b2, b3 = st.columns([2, 1, 1])
        set_name = b1.text_input("data set name (folder under the runs folder)", value="data-small", key="et_dname")
        shards = b2.number_input("shards (about 20 s each on one CPU core)", value=2, step=1, key="et_dshards")
        problem = inputs.range_problem("shards", shards, inputs.NumberRange(1, 1000, integer=True))
        if problem:
            st.error(f"Refused: {problem}.")
        folder = root / set_name.strip()
        key = f"data:{folder.resolve()}"
        if b3.button("▶ Build", key="et_dbuild", disabled=bool(problem) or not set_name.strip()):
            running = started_processes().get(key)
            if running is not None and running.poll() is None:
                st.error(f"Refused: {folder} is already being built (process {running.pid}).")
            else:
                try:
                    started_processes()[key] = trainruns.launch_data(folder, int(shards))
                    ss.pop("et_data_ready", None)
                except OSError as err:
                    st.error(f"Could not start build-data: {err}")
        show_data_build(folder, int(shards) if not problem else 1)


# ------------------------------------------------------------------ new run
with tab_new:
    sets = trainruns.data_sets(runs_root)
    data_build_form(runs_root, bool(sets))
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
    tree_budget = c7.number_input("tree budget", value=TRAIN_DEFAULTS["tree_budget"], key="et_budget")
    c8, c9, c10, c11, c12 = st.columns(5)
    anchors = c8.number_input("tree anchors per step", value=8, key="et_anchors",
                              help="anchors per step that get the tree loss (needed when λ > 0)")
    batch = c9.number_input("batch size (anchors)", value=TRAIN_DEFAULTS["batch_size"], key="et_batch")
    shards = c10.number_input("data size (shards; 0 = all)", value=8, key="et_shards")
    every = c11.number_input("checkpoint every (steps)", value=50, key="et_every")
    threads = c12.number_input("CPU threads", value=TRAIN_DEFAULTS["threads"], key="et_threads")
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
        st.caption(" · ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in last.items()))
    tail = trainruns.log_tail(folder)
    if tail:
        with st.expander("log (last lines)"):
            st.code(tail)


@st.fragment(run_every=REFRESH_SECONDS)
def show_runs(root: Path) -> None:
    """The runs under `root`, re-read every few seconds: new runs, states, checkpoints and Stop follow by themselves."""
    procs = started_processes()
    for folder, code in trainruns.reap(procs):  # finished children are waited for, never left as zombies
        procs.pop(folder, None)
        if code:
            ss.setdefault("et_exits", {})[folder] = code
    runs = trainruns.list_runs(root)
    if not runs:
        st.info(f"No training runs under {root} yet.")
        return
    st.dataframe(trainruns.runs_table(runs), hide_index=True, key="et_runs_table")
    names = [r.folder.name for r in runs]
    watched = Path(ss.get("et_watch", "")).name
    if watched in names and ss.get("et_watch_shown") != watched:  # a run started here: show it once it appears
        ss.et_pick = watched
        ss.et_watch_shown = watched
    elif ss.get("et_pick") not in names:
        ss.et_pick = names[0]
    pick = st.selectbox("run", names, key="et_pick")
    chosen = runs[names.index(pick)]
    show_progress(chosen.folder)
    if chosen.running:
        st.caption(f"refreshing every {REFRESH_SECONDS:g} s")
    code = ss.get("et_exits", {}).get(str(chosen.folder.resolve()))
    if code:
        st.error(f"The training process of {chosen.folder.name} exited with status {code}: see its log.")
    own = procs.get(str(chosen.folder.resolve()))
    r1, r2 = st.columns(2)
    if chosen.resumable and r1.button("↻ Resume this run", key="et_resume"):
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


with tab_runs:
    show_runs(runs_root)

# ------------------------------------------------------------------ compare checkpoints
with tab_compare:
    runs_now = trainruns.list_runs(runs_root)
    all_ckpts = [str(p) for r in runs_now for p in r.checkpoints]
    starting_pair = trainruns.default_comparison(runs_now)
    all_ckpts += [p for p in starting_pair if p not in all_ckpts]
    extra = st.text_input("another drafter folder (optional)", value="", key="et_cmp_extra")
    if extra.strip():
        all_ckpts.append(extra.strip())
    if ss.get("et_cmp_start") != starting_pair or any(p not in all_ckpts for p in ss.get("et_cmp", [])):
        ss.et_cmp_start = starting_pair  # a new newest checkpoint (or runs folder): start from the new pair
        ss.et_cmp = list(starting_pair)
    picks = st.multiselect("checkpoints", all_ckpts, key="et_cmp",
                           help="starts with the newest checkpoint against the committed default drafter")
    same = trainruns.identical_weights(picks)
    for first, second in same:
        st.error(f"{second} has exactly the same weights as {first} (identical files): comparing them shows one "
                 "drafter twice. Pick two different drafters.")
    e1, e2, e3, e4 = st.columns(4)
    budgets_text = e1.text_input("budgets", value="4,8,16", key="et_cmp_budgets")
    per_set = e2.number_input("held-out prompts per set", value=1, key="et_cmp_n")
    cmp_temp = e3.number_input("temperature", value=SAMPLING_TEMPERATURE, step=0.1, key="et_cmp_temp")
    cmp_tokens = e4.number_input("max new tokens", value=32, step=8, key="et_cmp_tokens")
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
    ready = bool(picks) and bool(budgets) and not problems and not same
    if st.button("Evaluate E per budget", disabled=not ready, key="et_cmp_run"):
        from tevcore.train import eval as engine_eval

        rows, errors = [], []
        with st.status("evaluating checkpoints (the real decoding loop, TEV verifier)…", expanded=True) as status:
            bar = st.progress(0.0)
            try:
                target = shared_ui.get_target(shared_ui.target_spec())
                prompts = engine_eval.eval_prompts(engine_eval.MIX, int(per_set))
            except (ValueError, OSError) as err:  # a missing model or prompt file
                errors.append(f"Could not prepare the evaluation: {err}")
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
                    errors.append(f"{path} ({type(err).__name__}): {err}")
                bar.progress((i + 1) / len(jobs), text=f"{Path(path).name}, budget {budget}")
            status.update(label="evaluation finished" + (" with errors (below)" if errors else ""),
                          state="error" if errors else "complete", expanded=False)
        for message in errors:  # outside the collapsed box, where they are seen
            st.error(message)
        ss.et_eval_rows = pd.DataFrame(rows)
    if ss.get("et_eval_rows") is not None and len(ss.et_eval_rows):
        st.plotly_chart(figures.eval_figure(ss.et_eval_rows), key="et_eval_fig")
        st.dataframe(ss.et_eval_rows, hide_index=True, key="et_eval_table")
