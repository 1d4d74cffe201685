"""Run folders and data sets seen from outside the training process: what each holds and how it stands.

A run folder is written by `python -m tevcore train` and read here through `rundir`'s readers only (its status,
its usable drafters, its lock): one reader of the writer's layout, for any front end that lists runs, shows their
progress or decides whether a new process may start on a folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tevcore.train import rundir
from tevcore.train.data import MANIFEST, build_progress
from tevcore.train.rundir import RunState

LOG_NAME = "train.log"  # a training process's output, when a server started it
DATA_LOG = "build-data.log"  # a data build's output, when a server started it
SHOWN_STATES = {RunState.INTERRUPTED: "stopped (resumable)"}  # a user's Ctrl-C or stop signal: it resumes


@dataclass
class RunInfo:
    """What a run folder says of itself: its status.json as the training process wrote it."""

    folder: Path
    state: RunState
    step: int = 0
    total: int = 0
    updated: float | None = None
    active_seconds: float | None = None  # time on the clock over every process that trained the run
    start_step: int = 0  # the step this (or the last) process resumed from
    steps_began: float | None = None  # when that process began its first step
    error: str | None = None
    pid: int | None = None
    checkpoints: list[Path] = field(default_factory=list)
    config: dict | None = None

    @property
    def shown_state(self) -> str:
        return SHOWN_STATES.get(self.state, self.state.value)

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / self.total) if self.total else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Remaining seconds of a running run at this process's own pace since its first step.

        None unless a live process has made a step: a stopped, crashed or finished run has no ETA,
        and a resumed process's loading time or earlier processes' pace are not guessed at.
        """
        steps = self.step - self.start_step
        if self.state is not RunState.RUNNING or steps <= 0 or self.steps_began is None or self.updated is None:
            return None
        return (self.updated - self.steps_began) / steps * max(0, self.total - self.step)

    @property
    def resumable(self) -> bool:
        return self.state in (RunState.CRASHED, RunState.INTERRUPTED) and (self.folder / rundir.CONFIG).is_file()

    @property
    def running(self) -> bool:
        return self.state in (RunState.RUNNING, RunState.STARTING)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_info(folder: Path) -> RunInfo:
    """Read a run folder; a missing or corrupt status is reported in `state`, never raised."""
    folder = Path(folder)
    config = _read_json(folder / rundir.CONFIG)
    drafters = rundir.usable_drafters(folder)
    if not (folder / rundir.STATUS).exists():
        state = RunState.NOT_STARTED if config is not None else RunState.UNREADABLE
        return RunInfo(folder, state, config=config, checkpoints=drafters,
                       error=None if config is not None else f"no {rundir.STATUS} or {rundir.CONFIG}")
    status = rundir.read_status(folder)  # {} when unreadable
    if not status:
        return RunInfo(folder, RunState.UNREADABLE, error=f"{rundir.STATUS} is corrupt", config=config, checkpoints=drafters)
    pid = status.get("pid")
    info = RunInfo(folder, RunState.read(status.get("state")), step=int(_number(status.get("step")) or 0),
                   total=int(_number(status.get("total_steps")) or 0), updated=_number(status.get("updated")),
                   active_seconds=_number(status.get("active_seconds")),
                   start_step=int(_number(status.get("start_step")) or 0),
                   steps_began=_number(status.get("steps_began")), error=status.get("error"), pid=pid,
                   checkpoints=drafters, config=config)
    if info.running and not rundir.pid_alive(pid):
        info.state = RunState.CRASHED
        info.error = info.error or f"the training process {pid} is gone without finishing"
    return info


def list_runs(root: Path) -> list[RunInfo]:
    """Every training run folder under `root` (folders with a config.json or status.json), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [run_info(p) for p in sorted(root.iterdir())
            if p.is_dir() and ((p / rundir.STATUS).exists() or (p / rundir.CONFIG).exists())
            and not (p / MANIFEST).exists()]
    return sorted(runs, key=lambda r: r.updated or 0, reverse=True)


def data_sets(root: Path) -> list[Path]:
    """Distillation set folders (with a manifest.json) under `root`."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).is_file())


def data_progress(folder: Path) -> tuple[int, int] | None:
    """(shards written, shards planned) of a data-set build, by the plan its manifest records; None before that."""
    return build_progress(Path(folder))


def busy_reason(folder: Path) -> str | None:
    """Why a new training process must not start on `folder` as the folder itself says (None if it may): a live
    process holds its lock, its status says it runs, or it has finished."""
    folder = Path(folder)
    holder = rundir.lock_holder(folder)
    if holder is not None:
        return f"{folder} is in use by training process {holder} (its lock file is held)"
    info = run_info(folder) if folder.is_dir() else None
    if info is not None and info.running:
        return f"{folder} is already training (status: {info.state}, process {info.pid})"
    if info is not None and info.state is RunState.FINISHED:
        return f"{folder} has finished training; choose a new run name"
    return None


def log_tail(folder: Path, lines: int = 15, name: str = LOG_NAME) -> str:
    """The last lines of a job's log as a terminal would show them (tqdm's rewritten lines at their last state)."""
    path = Path(folder) / name
    if not path.is_file():
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    cleaned = [line.split("\r")[-1] for line in text.splitlines()]
    return "\n".join(cleaned[-lines:])
