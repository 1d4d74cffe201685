"""Training control as a service: plan a run, start it (or a resume, or a data build) through the job board, stop
it, say whose it is; the pages lay out what it returns.

A training run is asked for once, typed: a `TrainRequest` (its folder and a validated `TrainConfig`, from the page's
form or a resume's saved config) carries the caps' check, the plan and the command to the job board; only the
process reads it back, from the command's flags. Command lines are spelled by the CLI modules themselves
(`train_cli.command_line`, `data_cli.command_line`, from the flags their parsers declare), and the plan is the CLI's
own dry run of the config, made in-process and taken as a value. Every
start goes through one `JobBoard` per runs folder, in both profiles: the cap on running jobs, each job's owner, and
the registry a restarted server reads. On one's own machine the user is the host of every job, and a job that
outlives the server is found again at the next start, shown as such, and can be stopped; a room's server ends its
jobs when it stops (the app registers `JobBoard.end_all`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tevcore.room import guarded
from tevcore.room.jobs import Job, JobBoard, JobRefused
from tevcore.room.limits import Limits
from tevcore.train import data_cli, train_cli
from tevcore.train.config import TrainConfig
from tevcore.train.recipes import SMALL_SET
from tevcore.train.rundir import read_saved_config
from tevcore.train.runs import DATA_LOG, LOG_NAME, busy_reason

REGISTRY = ".room-jobs.json"  # the board's record of its running jobs, in the runs folder it serves
CHECKOUT = Path(__file__).resolve().parents[2]  # where `python -m tevcore` finds this package


class FolderBusy(JobRefused):
    """A start refused because the folder is in use: a job of this board, or a process the folder itself names."""


@dataclass(frozen=True)
class Caller:
    """Who asks: a session's owner key, and whether it speaks for the host (everyone, on one's own machine)."""

    who: str
    is_host: bool


@dataclass(frozen=True)
class TrainRequest:
    """One training run asked for: its folder and its config, validated once (`TrainConfig`), and whether it
    resumes the folder's run from its saved config and newest checkpoint."""

    folder: Path
    config: TrainConfig
    resume: bool = False

    @classmethod
    def from_form(cls, folder: Path, values: Mapping[str, object]) -> TrainRequest:
        """A new run from a form's values (TrainConfig fields; None leaves a field at its default); a ValueError
        names a field that is out of range or unknown."""
        return cls(Path(folder), TrainConfig.from_dict({k: v for k, v in values.items() if v is not None}))

    @classmethod
    def resuming(cls, folder: Path) -> TrainRequest:
        """A resume of the run in `folder`, as its saved config.json describes it (a ValueError when damaged)."""
        folder = Path(folder)
        return cls(folder, TrainConfig.from_dict(read_saved_config(folder)), resume=True)

    def command(self) -> list[str]:
        """The process the job board starts: a resume reads the saved config; a new run gets every field as a
        flag, defaults included, so the command shown is the whole config (the process's parser reads back this
        very config)."""
        if self.resume:
            return resume_command(self.folder)
        return train_command(self.folder, self.config.to_dict())


def train_command(folder: Path, values: Mapping[str, object]) -> list[str]:
    """`python -m tevcore train` with `values` (TrainConfig fields) into `folder`; an unknown field is a ValueError."""
    return [sys.executable, "-m", "tevcore", "train", *train_cli.command_line(folder, values)]


def resume_command(folder: Path) -> list[str]:
    """The command that resumes the run in `folder` from its saved config and newest checkpoint."""
    folder = Path(folder)
    return [sys.executable, "-m", "tevcore", "train", *train_cli.command_line(folder, {}, config=folder / "config.json")]


def data_command(folder: Path, shards: int, threads: int | None = None) -> list[str]:
    """`python -m tevcore build-data` for a small set of the recipe's kind (`recipes.SMALL_SET`); `threads` None
    leaves build-data's own default."""
    return [sys.executable, "-m", "tevcore", "build-data",
            *data_cli.command_line(folder, SMALL_SET, max_shards=int(shards), threads=threads)]


def plan(request: TrainRequest) -> tuple[bool, str]:
    """The CLI's own dry run of the request's config, in-process (it reads the data manifest only).

    Returns (ok, the plan or the reason it was refused). The plan is taken as a value: the process's stdout and
    stderr are never swapped, so another session's output cannot land here, nor this plan's anywhere else.
    """
    try:
        return True, train_cli.config_plan(request.config).strip()
    except (ValueError, FileNotFoundError, KeyError, OSError) as error:
        return False, f"{type(error).__name__}: {error}"


class TrainingControl:
    """The trainings and data builds of one runs folder: start, resume, stop, and whose each one is."""

    def __init__(self, board: JobBoard, limits: Limits) -> None:
        self.board = board
        self.limits = limits

    # -------------------------------------------------------------- how each stands
    def job_on(self, folder: Path) -> Job | None:
        """The newest job started on `folder` (running or ended), by this server or found again after a restart."""
        return self.board.last_on(folder)

    def running_on(self, folder: Path) -> Job | None:
        job = self.job_on(folder)
        return job if job is not None and job.running else None

    def refresh(self) -> list[Job]:
        """The running jobs; every ended child is waited for on the way (no process is left a zombie)."""
        return self.board.running()

    def may_control(self, folder: Path, caller: Caller) -> bool:
        """Whether `caller` may stop or resume the job on `folder`: its starter or the host (anyone, for a folder
        no job of this board has touched)."""
        job = self.job_on(folder)
        return job is None or self.board.may_control(job, caller.who, caller.is_host)

    # -------------------------------------------------------------- starting
    def check(self, request: TrainRequest) -> TrainRequest:
        """The request against this server's caps on every field that sizes a run (`guarded.check_training`)."""
        guarded.check_training(self.limits, request.config)
        return request

    def start_training(self, caller: Caller, request: TrainRequest) -> Job:
        """Start the requested run (or resume), or refuse in one line: the caps on its config (a resume's saved
        config counts), a busy folder, the board's cap and owners."""
        self.check(request)
        folder = request.folder
        own = self.running_on(folder)
        if own is not None:
            raise FolderBusy(f"{folder} is already training (started from this app, process {own.pid})")
        reason = busy_reason(folder)
        if reason:
            raise FolderBusy(reason)
        return self._start(caller, "train", folder, request.command(), folder / LOG_NAME)

    def resume(self, caller: Caller, folder: Path) -> Job:
        return self.start_training(caller, TrainRequest.resuming(folder))

    def build_data(self, caller: Caller, folder: Path, shards: int, threads: int | None = None) -> Job:
        """Start a data build into `folder` (it resumes from the shards written), or refuse in one line."""
        folder = Path(folder)
        guarded.check_data(self.limits, int(shards))
        running = self.running_on(folder)
        if running is not None:
            raise FolderBusy(f"{folder} is already being built (process {running.pid})")
        return self._start(caller, "data", folder, data_command(folder, shards, threads), folder / DATA_LOG)

    def _start(self, caller: Caller, kind: str, folder: Path, command: list[str], log: Path) -> Job:
        return self.board.start(caller.who, kind, folder, command, log, unlocked=self.board.open_to_participants,
                                is_host=caller.is_host, cwd=CHECKOUT)

    # -------------------------------------------------------------- stopping
    def stop(self, caller: Caller, folder: Path) -> Job:
        """Send the job running on `folder` a stop signal (a training run saves a resumable state, a data build
        keeps its shards); refused in one line for anyone but its starter or the host, or when nothing runs."""
        job = self.running_on(folder)
        if job is None:
            raise JobRefused(f"no job of this server runs on {Path(folder).name}")
        self.board.stop(job, caller.who, caller.is_host)
        return job
