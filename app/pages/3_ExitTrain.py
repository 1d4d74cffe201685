"""ExitTrain: configure, launch (in the background) and watch drafter training runs; compare checkpoints."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shared_ui  # noqa: E402
import streamlit as st  # noqa: E402
from tevcore.room.jobs import Job, JobRefused  # noqa: E402
from tevcore.room.limits import CapExceeded  # noqa: E402
from tevcore.room.training import Caller, FolderBusy, TrainingControl, TrainRequest, plan  # noqa: E402
from tevcore.studio.training import (DATA_LOG, DEFAULT_DRAFTER, LOG_NAME, TREE_WEIGHTS, RunInfo,  # noqa: E402
                                     RunState, checkpoints_signature, data_progress, data_sets, list_runs,
                                     log_tail)
from tevcore.studio.training_state import ExitTrainSession, kept_choice  # noqa: E402

from exittrain_ablation import ablation_tab  # noqa: E402
from exittrain_compare import compare_tab  # noqa: E402
from explorer_state import ExplorerSession  # noqa: E402
import figures  # noqa: E402
import inputs  # noqa: E402
import room_ui  # noqa: E402
import trainruns  # noqa: E402

shared_ui.page_header("ExitTrain", "Train the drafter on the trees it really builds: the tree loss weights each "
                      "node by the target's flow (floored P(v), or X(v)·depth(v)). Training runs as a background "
                      "process (`python -m tevcore train`) writing into a run folder; this page only reads it.")
ss = st.session_state
session = room_ui.page_state(ExitTrainSession)  # the form, the picks and the comparisons: kept across pages
form = session.train


REFRESH_SECONDS = 2.0


START_NEW = "new"  # start-from choices besides drafter folders
START_OTHER = "other"


def start_label(choice: str) -> str:
    if choice == START_NEW:
        return "a new drafter (random weights)"
    if choice == START_OTHER:
        return "another drafter folder (type it beside)"
    return f"the committed drafter ({choice})" if Path(choice) == DEFAULT_DRAFTER else choice


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def job_of(control: TrainingControl, folder: Path, kind: str) -> Job | None:
    """The newest job of this kind the training service knows on `folder` (started here or found again)."""
    job = control.job_on(folder)
    return job if job is not None and job.kind == kind else None


def found_again_note(job: Job) -> None:
    if job.found_again:
        st.caption(f"process {job.pid} was started from this app before a server restart and found again")


# The run and build controls act in their on_click callbacks: Streamlit runs those before the next script run starts.
# Read as `if st.button(...)` in the body, a click could be dropped: the fragments below rerun the whole app when a
# checkpoint appears (every few seconds in a fast run), and a rerun made before the button's line resets its click.
# A callback's outcome waits in `et_said_<slot>` until the fragment that owns the button shows it.
def say_later(slot: str, kind: str, text: str) -> None:
    ss[f"et_said_{slot}"] = (kind, text)


def said(slot: str) -> None:
    """Show (once) what a control's callback did in `slot`."""
    kind, text = ss.pop(f"et_said_{slot}", (None, None))
    if kind is not None:
        getattr(st, kind)(text)


def stop_job(control: TrainingControl, caller: Caller, folder: Path, slot: str) -> None:
    try:  # SIGTERM: a trainer ends as on Ctrl-C, resumable; a data build keeps its shards
        job = control.stop(caller, folder)
    except JobRefused as err:
        say_later(slot, "error", f"Refused: {err}")
        return
    if job.kind == "data":
        say_later(slot, "info", f"sent a stop signal to the build of {folder.name} (process {job.pid})")
    else:
        say_later(slot, "info", f"sent a stop signal to process {job.pid}; the run can be resumed from its newest "
                  "checkpoint")


def resume_run(control: TrainingControl, caller: Caller, folder: Path) -> None:
    try:
        control.resume(caller, folder)
        say_later("runs", "success", "resumed from its newest checkpoint")
    except (FolderBusy, JobRefused, CapExceeded) as err:
        say_later("runs", "error", f"Refused: {err}")
    except (ValueError, OSError) as err:  # a saved config the CLI no longer reads
        say_later("runs", "error", f"Could not resume: {err}")


def activate_checkpoint() -> None:
    room_ui.page_state(ExplorerSession).choose_drafter(ss.et_ckpt, ss)
    say_later("runs", "success", f"The tree explorer will now offer {ss.et_ckpt} as its drafter.")


def start_refused(err: ValueError) -> None:
    """A start the service refused: a busy folder is said and the page goes on; a cap or the job board's refusal
    ends this run with its line."""
    if isinstance(err, FolderBusy):
        st.error(f"Refused: {err}.")
    else:
        room_ui.refused(err)


if not room_ui.jobs_allowed():  # a room: training, data builds and Compare are the host's unless opened
    st.info("In this workshop room, training, data builds and checkpoint comparisons are the host's: the host "
            "enters the host secret above, or opens them to participants.")
    st.stop()
room_ui.host_controls()
if not room_ui.in_room():  # a room: the host's one runs folder
    form.runs_folder = st.text_input("runs folder", value=form.runs_folder, key="et_root")
runs_root = room_ui.settings().runs if room_ui.in_room() else Path(form.runs_folder)
control = room_ui.training(runs_root)  # every start and stop goes through its job board, in both profiles
me = room_ui.caller()

tab_new, tab_runs, tab_compare, tab_ablation = st.tabs(["New run", "Runs", "Compare checkpoints", "Ablation"])

# ------------------------------------------------------------------ a small data set, without a terminal
@st.fragment(run_every=REFRESH_SECONDS)
def show_data_build(folder: Path) -> None:
    """Progress of a `build-data` started from this page: shards written of those its own plan (the manifest it
    writes before the first shard) holds; read from the folder when no job of this server builds it (a build
    started elsewhere, or one that ended)."""
    job = job_of(control, folder, "data")
    if job is None and not (folder / DATA_LOG).is_file():
        return
    running = job is not None and job.running  # (asking also waits for a finished build: no zombie)
    code = job.exit_code if job is not None else None  # None while it runs, and for a build found again
    progress = data_progress(folder)
    done, planned = progress or (0, 0)
    if progress is not None and done >= planned and not running and code in (None, 0):
        if ss.get("et_data_ready") != str(folder):  # once: rerun the page so the new set is offered, and chosen
            ss.et_data_ready = str(folder)
            form.data = ss.et_data = str(folder)  # set in the box, which is on the screen (not only kept)
            st.rerun(scope="app")
        st.success(f"{folder.name} is ready ({done} shards): it is the distillation set below.")
    elif code not in (None, 0):
        st.error(f"build-data exited with status {code}; its log: {folder / DATA_LOG}")
    elif running:
        text = (f"building {folder.name}: {done}/{planned} shards" if progress is not None
                else f"building {folder.name}: loading the target and planning the shards")
        st.progress(done / planned if planned else 0.0, text=text)
        found_again_note(job)
        if control.may_control(folder, me):  # the manifest's plan stays: ▶ Build resumes from the shards written
            st.button("■ Stop this build", key="et_dstop", on_click=stop_job, args=(control, me, folder, "data"))
    elif progress is not None:
        st.info(f"{folder.name}: {done}/{planned} shards written, and no build of it runs from this app "
                "(▶ Build resumes it).")
    else:
        st.info(f"{folder.name} has no plan yet (no manifest); its log: {folder / DATA_LOG}")
    said("data")


def data_build_form(root: Path, have_sets: bool) -> None:
    # opened or folded once per session: a set appearing later (another participant's build) must not fold the
    # form under the hands of someone typing in it
    expanded = st.session_state.setdefault("et_build_form_open", not have_sets)
    with st.expander("Build a small data set (the engine's `build-data`, in the background)", expanded=expanded):
        b1, b2, b3 = st.columns([2, 1, 1])
        set_name = form.data_set_name = b1.text_input("data set name (folder under the runs folder)",
                                                      value=form.data_set_name, key="et_dname")
        shards = form.data_shards = b2.number_input("shards (target-generated: 1-3 min each on one CPU core)",
                                                    value=form.data_shards, step=1, key="et_dshards")
        problem = inputs.range_problem("shards", shards, inputs.NumberRange(1, 1000, integer=True))
        if problem:
            st.error(f"Refused: {problem}.")
        folder = root / set_name.strip()
        if b3.button("▶ Build", key="et_dbuild", disabled=bool(problem) or not set_name.strip()):
            if room_ui.in_room():  # a plain name under the host's runs folder
                room_ui.check(lambda _limits, name: room_ui.plain_name(name), set_name.strip())
            try:  # the service checks the cap on shards, a build already running there, and the job board
                control.build_data(me, folder, int(shards))
                ss.pop("et_data_ready", None)
            except ValueError as err:
                start_refused(err)
            except OSError as err:
                st.error(f"Could not start build-data: {err}")
        show_data_build(folder)


# ------------------------------------------------------------------ new run
with tab_new:
    sets = data_sets(runs_root)
    data_build_form(runs_root, bool(sets))
    c1, c2, c3 = st.columns(3)
    name = form.run_name = c1.text_input("run name (folder under the runs folder)", value=form.name(), key="et_name")
    set_options = [str(p) for p in sets] or ["(none found: build one with `python -m tevcore build-data`)"]
    data = form.data = c2.selectbox("distillation set", set_options, index=kept_choice(set_options, form.data),
                                    key="et_data")
    s1, s2, s3 = st.columns([3, 2, 1])
    starts = [*([str(DEFAULT_DRAFTER)] if DEFAULT_DRAFTER.is_dir() else []),
              *(str(p) for r in list_runs(runs_root) for p in r.checkpoints), START_NEW,
              *([] if room_ui.in_room() else [START_OTHER])]  # a room: no drafter folder is typed
    start_from = form.start_from = s1.selectbox(
        "start from", starts, index=kept_choice(starts, form.start_from), key="et_init", format_func=start_label,
        help="the drafter whose weights training begins with (`--init`): the committed drafter, a checkpoint of a "
             "run, any drafter folder, or new random weights")
    if not room_ui.in_room():
        form.other_init = s2.text_input("drafter folder to start from", value=form.other_init, key="et_init_other",
                                        disabled=start_from != START_OTHER)
    other_init = "" if room_ui.in_room() else form.other_init
    init = {START_NEW: None, START_OTHER: other_init.strip() or None}.get(start_from, start_from)
    kind = "fine" if init is not None else "new"  # each kind of start opens at its own recipe, and keeps its numbers
    # every number opens at the package's recipe (`tevcore.train.recipes`): TrainConfig's defaults with ExitTrain's
    # loss on, a short run's size, and the fine-tuning numbers (and size) when the run starts from a trained drafter
    start = form.numbers(init is not None)
    start.steps = c3.number_input("steps", value=start.steps, step=50, key=f"et_steps_{kind}")
    start.warmup = s3.number_input("warmup (steps)", value=start.warmup, step=10, key=f"et_warmup_{kind}")
    r1, r2, r3, r4 = st.columns(4)
    start.lr = r1.number_input("learning rate", value=start.lr, step=1e-5, format="%.1e", key=f"et_lr_{kind}",
                               help="fine-tuning a trained drafter opens at a small rate that was measured not to "
                                    "make the committed drafter worse (`tevcore.train.recipes`); a new one starts at "
                                    "TrainConfig's")
    start.dropout = r2.number_input("dropout", value=start.dropout, step=0.05, key=f"et_dropout_{kind}")
    start.weight_decay = r3.number_input("weight decay", value=start.weight_decay, step=0.01, key=f"et_decay_{kind}")
    start.min_lr_ratio = r4.number_input("final learning rate (share of the rate)", value=start.min_lr_ratio,
                                         step=0.05, key=f"et_min_lr_{kind}")
    c4, c5, c6, c7 = st.columns(4)
    form.tree_lambda = c4.number_input("λ (tree loss weight; 0 = plain distillation)", value=form.tree_lambda,
                                       step=0.05, key="et_lambda")
    weights = list(TREE_WEIGHTS)
    form.tree_weight = c5.selectbox(
        "weight type", weights, index=kept_choice(weights, form.tree_weight), key="et_weight",
        help="path: P(v) with every edge floored at α; exit: X(v)·depth(v); flow: P(v) times the target's whole row "
             "at v, so the tokens the tree lacked count too")
    form.tree_alpha = c6.number_input("α (edge floor)", value=form.tree_alpha, step=1e-4, format="%.1e",
                                      key="et_alpha")
    form.tree_budget = c7.number_input("tree budget", value=form.tree_budget, key="et_budget")
    c8, c9, c10, c11, c12 = st.columns(5)
    form.tree_anchors = c8.number_input("tree anchors per step", value=form.tree_anchors, key="et_anchors",
                                        help="anchors per step that get the tree loss (needed when λ > 0)")
    form.batch_size = c9.number_input("batch size (anchors)", value=form.batch_size, key="et_batch")
    form.max_shards = c10.number_input("data size (shards; 0 = all)", value=form.max_shards, key="et_shards")
    form.checkpoint_every = c11.number_input("checkpoint every (steps)", value=form.checkpoint_every, key="et_every")
    form.threads = c12.number_input("CPU threads", value=form.threads, key="et_threads")
    values = form.values(data if sets else None, init)
    folder = runs_root / name.strip()
    request, request_error = None, None
    if not name.strip() or "/" in name or name.strip().startswith("."):
        request_error = "Give the run a plain folder name."
    elif not sets:
        request_error = f"No distillation set under {runs_root}: build one first (`python -m tevcore build-data`)."
    else:
        try:  # typed once: the caps, the plan, the job board and the process all read this request
            request = control.check(TrainRequest.from_form(folder, values))
        except CapExceeded as err:
            request_error = f"Refused: {err}"
        except ValueError as err:
            request_error = f"These settings are not a training config: {err}"
    if request_error:
        st.error(request_error)
    elif request:
        for warning in request.config.warnings():
            st.warning(f"Warning: {warning}.")
        ok_plan, plan_text = plan(request)
        st.markdown("**Plan (the CLI's dry run)**")
        if ok_plan:
            st.code(plan_text, language="text")
        else:
            st.error(f"The training CLI refuses these settings: {plan_text}")
            request = None
    if request:
        st.code("python " + " ".join(request.command()[1:]), language="bash")
    if st.button("▶ Start training", type="primary", disabled=request is None, key="et_start"):
        try:  # the service checks the caps on the request, a busy folder, and the job board
            job = control.start_training(me, request)
        except ValueError as err:
            start_refused(err)
        except OSError as err:
            st.error(f"Could not start the training process: {err}")
        else:
            ss.et_watch = str(folder)
            st.success(f"Started process {job.pid}, writing into {folder} (log: {folder / LOG_NAME}). "
                       "Follow it in the Runs tab.")

# ------------------------------------------------------------------ runs
def progress_label(info: RunInfo, launched: bool = False) -> str:
    """State, step, the run's time on the clock over all its processes, and (only while it runs) the ETA.

    `launched`: this app started a process on the run that has not written its status yet (it loads the target).
    """
    state = "resuming (the new process is loading)" if launched and not info.running else info.shown_state
    label = f"{state}: step {info.step}/{info.total} · elapsed {fmt_seconds(info.active_seconds)}"
    return label + (f" · ETA {fmt_seconds(info.eta_seconds)}" if info.state is RunState.RUNNING else "")


def show_progress(info: RunInfo, launched: bool) -> None:
    folder = info.folder
    st.progress(info.fraction, text=progress_label(info, launched))
    if info.error:  # the status holds only its own process's error: a resume or an end clears it
        st.error(f"{info.folder.name}: {info.error}")
    try:
        metrics = trainruns.metrics_frame(folder, room_ui.limits())
    except ValueError as err:  # past the server's byte caps
        st.warning(f"The training curves are not drawn: {err}")
        metrics = []
    if len(metrics):
        st.plotly_chart(figures.training_curves_figure(metrics), key=f"et_curves_{folder.name}")
        last = metrics.iloc[-1].dropna().to_dict()
        st.caption(" · ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in last.items()))
    tail = log_tail(folder)
    if tail:
        with st.expander("log (last lines)"):
            st.code(tail)


@st.fragment(run_every=REFRESH_SECONDS)
def show_runs(root: Path) -> None:
    """The runs under `root`, re-read every few seconds: new runs, states, checkpoints and Stop follow by themselves."""
    control.refresh()  # finished children are waited for, never left as zombies
    runs = list_runs(root)
    signature = checkpoints_signature(runs)
    if ss.setdefault("et_offered", signature) != signature:  # a checkpoint or an end: redraw the Compare tab too
        ss.et_offered = signature
        st.rerun(scope="app")
    if not runs:
        st.info(f"No training runs under {root} yet.")
        return
    st.dataframe(trainruns.runs_table(runs), hide_index=True, key="et_runs_table")
    names = [r.folder.name for r in runs]
    watched = Path(ss.get("et_watch", "")).name
    if watched in names and ss.get("et_watch_shown") != watched:  # a run started here: show it once it appears
        ss.et_pick = watched
        ss.et_watch_shown = watched
    elif ss.get("et_pick") not in names:  # the box forgot (another page was shown) or its run is gone
        ss.et_pick = session.run if session.run in names else names[0]
    pick = session.run = st.selectbox("run", names, key="et_pick")
    chosen = runs[names.index(pick)]
    job = job_of(control, chosen.folder, "train")  # the newest process this app started on the run, if any
    own_running = job is not None and job.running
    show_progress(chosen, own_running)
    if own_running:
        found_again_note(job)
    if chosen.running:
        st.caption(f"refreshing every {REFRESH_SECONDS:g} s")
    code = job.exit_code if job is not None else None
    if code and chosen.state not in (RunState.INTERRUPTED, RunState.FINISHED):  # a stop is no failure
        st.error(f"The training process of {chosen.folder.name} exited with status {code}: see its log.")
    r1, r2 = st.columns(2)
    in_charge = control.may_control(chosen.folder, me)  # a room: the run's starter or the host
    if chosen.resumable and in_charge:
        r1.button("↻ Resume this run", key="et_resume", on_click=resume_run, args=(control, me, chosen.folder))
    if own_running and in_charge:
        r2.button("■ Stop (started from this app)", key="et_stop", on_click=stop_job,
                  args=(control, me, chosen.folder, "runs"))
    said("runs")
    if chosen.checkpoints:
        checkpoints = [str(p) for p in chosen.checkpoints]
        if ss.get("et_ckpt") not in checkpoints and session.checkpoint in checkpoints:
            ss.et_ckpt = session.checkpoint
        session.checkpoint = st.selectbox("checkpoint", checkpoints, key="et_ckpt")
        st.button("Make this the explorer's drafter", key="et_activate", on_click=activate_checkpoint)
    else:
        st.caption("no checkpoint yet")
    if room_ui.page_state(ExplorerSession).active_drafter:
        st.caption(f"active drafter of the explorer: {room_ui.page_state(ExplorerSession).active_drafter}")


with tab_runs:
    show_runs(runs_root)

# ------------------------------------------------------------------ compare checkpoints
with tab_compare:
    compare_tab(runs_root, session)

with tab_ablation:
    ablation_tab(runs_root, session.ablation)
