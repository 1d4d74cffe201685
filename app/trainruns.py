"""Training runs seen from the app (no streamlit): list run folders, read progress, launch the CLI.

A run folder is written by `python -m tevcore train` and read here through
`tevcore.train.rundir` only (its status, its usable drafters, its lock): one
reader of the writer's layout. The app starts the CLI as a background
process and never trains in the script thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tevcore.train import rundir
from tevcore.train.data import MANIFEST, build_progress

LOG_NAME = "train.log"
STOPPED_STATES = ("interrupted", "stopped")  # a user's Ctrl-C or stop signal: the run resumes from its checkpoint
SHOWN_STATES = {"interrupted": "stopped (resumable)", "stopped": "stopped (resumable)"}


@dataclass
class RunInfo:
    """What the app knows about one run folder: its status.json as the training process wrote it."""

    folder: Path
    state: str  # running / finished / crashed / interrupted / starting / not started / unreadable
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
        return SHOWN_STATES.get(self.state, self.state)

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
        if self.state != "running" or steps <= 0 or self.steps_began is None or self.updated is None:
            return None
        return (self.updated - self.steps_began) / steps * max(0, self.total - self.step)

    @property
    def resumable(self) -> bool:
        return self.state in ("crashed", *STOPPED_STATES) and (self.folder / "config.json").is_file()

    @property
    def running(self) -> bool:
        return self.state in ("running", "starting")


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
    config = _read_json(folder / "config.json")
    drafters = rundir.usable_drafters(folder)
    if not (folder / rundir.STATUS).exists():
        state = "not started" if config is not None else "unreadable"
        return RunInfo(folder, state, config=config, checkpoints=drafters,
                       error=None if config is not None else f"no {rundir.STATUS} or config.json")
    status = rundir.read_status(folder)  # {} when unreadable
    if not status:
        return RunInfo(folder, "unreadable", error=f"{rundir.STATUS} is corrupt", config=config, checkpoints=drafters)
    pid = status.get("pid")
    info = RunInfo(folder, str(status.get("state", "unknown")), step=int(_number(status.get("step")) or 0),
                   total=int(_number(status.get("total_steps")) or 0), updated=_number(status.get("updated")),
                   active_seconds=_number(status.get("active_seconds")),
                   start_step=int(_number(status.get("start_step")) or 0),
                   steps_began=_number(status.get("steps_began")), error=status.get("error"), pid=pid,
                   checkpoints=drafters, config=config)
    if info.running and not rundir.pid_alive(pid):
        info.state = "crashed"
        info.error = info.error or f"the training process {pid} is gone without finishing"
    return info


def list_runs(root: Path) -> list[RunInfo]:
    """Every training run folder under `root` (folders with a config.json or status.json)."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [run_info(p) for p in sorted(root.iterdir())
            if p.is_dir() and ((p / rundir.STATUS).exists() or (p / "config.json").exists())
            and not (p / MANIFEST).exists()]
    return sorted(runs, key=lambda r: r.updated or 0, reverse=True)


def runs_table(runs: list[RunInfo]) -> pd.DataFrame:
    rows = []
    for r in runs:
        rows.append({"run": r.folder.name, "state": r.shown_state, "step": f"{r.step}/{r.total}",
                     "resumable": r.resumable, "checkpoints": len(r.checkpoints),
                     "updated": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.updated)) if r.updated else "",
                     "error": r.error or ""})
    return pd.DataFrame(rows, columns=["run", "state", "step", "resumable", "checkpoints", "updated", "error"])


def metrics_frame(folder: Path) -> pd.DataFrame:
    """metrics.jsonl as a frame (a line being written is skipped)."""
    path = Path(folder) / "metrics.jsonl"
    if not path.is_file():
        return pd.DataFrame()
    from appdata import read_jsonl_frame

    try:
        return read_jsonl_frame(path.read_text())
    except (OSError, UnicodeDecodeError):
        return pd.DataFrame()


def data_sets(root: Path) -> list[Path]:
    """Distillation set folders (with a manifest.json) under `root`."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).is_file())


def busy_reason(folder: Path, own: subprocess.Popen | None = None) -> str | None:
    """Why a new training process must not start on `folder` (None if it may).

    `own` is the process this app started on `folder` earlier, if any: while it
    runs, it refuses a start before its lock or status file appears.
    """
    folder = Path(folder)
    if own is not None and own.poll() is None:
        return f"{folder} is already training (started from this app, process {own.pid})"
    holder = rundir.lock_holder(folder)
    if holder is not None:
        return f"{folder} is in use by training process {holder} (its lock file is held)"
    info = run_info(folder) if folder.is_dir() else None
    if info is not None and info.running:
        return f"{folder} is already training (status: {info.state}, process {info.pid})"
    if info is not None and info.state == "finished":
        return f"{folder} has finished training; choose a new run name"
    return None


# ---------------------------------------------------------------- the CLI's flags, read from its parser

def cli_parser() -> argparse.ArgumentParser:
    """The train CLI's own argument parser."""
    from tevcore.train import train_cli

    parser = argparse.ArgumentParser(prog="tevcore train")
    train_cli.add_arguments(parser)
    return parser


def build_command(folder: Path, values: dict, dry_run: bool = False,
                  parser: argparse.ArgumentParser | None = None) -> list[str]:
    """`python -m tevcore train ...` for the chosen values, with flag names taken from the CLI parser.

    `values` maps config field names (steps, tree_lambda, ...) to values; fields
    the CLI does not know are reported with a ValueError.
    """
    parser = parser or cli_parser()
    by_dest = {a.dest: a for a in parser._actions}
    positional = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
    cmd = [sys.executable, "-m", "tevcore", "train"]
    if positional:
        cmd.append(str(folder))
    elif "out" in by_dest:
        cmd += [by_dest["out"].option_strings[-1], str(folder)]
    unknown = []
    for name, value in values.items():
        if value is None:
            continue
        action = by_dest.get(name)
        if action is None:
            unknown.append(name)
            continue
        flag = max(action.option_strings, key=len)
        if isinstance(action, argparse._StoreTrueAction):
            if value:
                cmd.append(flag)
        else:
            cmd += [flag, str(value)]
    if unknown:
        raise ValueError(f"the train CLI has no option for {', '.join(unknown)}")
    if dry_run:  # (plan() adds the flag itself)
        dry = by_dest.get("dry_run")
        if dry is None:
            raise ValueError("the train CLI has no --dry-run option")
        cmd.append(max(dry.option_strings, key=len))
    return cmd


class _OptionRefused(Exception):
    """An option the CLI's parser refused (its message is argparse's)."""


class _RefusingParser(argparse.ArgumentParser):
    """The CLI's parser, but a refused option raises instead of printing to the process's stderr and exiting."""

    def error(self, message: str):
        raise _OptionRefused(message)

    def exit(self, status: int = 0, message: str | None = None):
        raise _OptionRefused(message or f"the training options were refused (status {status})")


def plan(cmd: list[str]) -> tuple[bool, str]:
    """The CLI's own dry run of `cmd`, in-process (it validates the config and reads the data manifest only).

    Returns (ok, the plan or the reason it was refused). The plan is taken as a value: the process's stdout and
    stderr are never swapped, so another session's output cannot land here, nor this plan's anywhere else.
    """
    from tevcore.train import train_cli

    parser = _RefusingParser(prog="tevcore train", add_help=False)
    train_cli.add_arguments(parser)
    try:
        args = parser.parse_args([part for part in cmd[4:] if part != "--dry-run"])
    except _OptionRefused as refused:
        return False, str(refused)
    try:
        return True, train_cli.plan_text(args).strip()
    except (ValueError, FileNotFoundError, KeyError, OSError) as error:
        return False, f"{type(error).__name__}: {error}"


def launch(cmd: list[str], folder: Path) -> subprocess.Popen:
    """Start training in the background; its output goes to <folder>/train.log."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / LOG_NAME, "a", encoding="utf-8")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                cwd=str(Path(__file__).resolve().parents[1]))
    finally:
        log.close()


def log_tail(folder: Path, lines: int = 15) -> str:
    path = Path(folder) / LOG_NAME
    if not path.is_file():
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    # tqdm rewrites one line with carriage returns: keep the last state of each line
    cleaned = [line.split("\r")[-1] for line in text.splitlines()]
    return "\n".join(cleaned[-lines:])


# ---------------------------------------------------------------- processes, weights, data sets

DEFAULT_DRAFTER = Path(__file__).resolve().parents[1] / "assets" / "drafter"  # the committed default drafter
DATA_LOG = "build-data.log"


def reap(processes: dict) -> list[tuple[str, int]]:
    """Collect the exit status of every finished process the app started (no zombies); returns (folder, code)."""
    finished = []
    for folder, proc in list(processes.items()):
        code = proc.poll()  # poll() waits for a finished child, so it never stays <defunct>
        if code is not None:
            finished.append((folder, code))
    return finished


def weights_digest(folder: Path) -> str | None:
    """SHA-256 of a drafter folder's weight files (None when it has none), to tell identical drafters apart."""
    import hashlib

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def identical_weights(folders: list[str]) -> list[tuple[str, str]]:
    """Pairs of the chosen drafter folders whose weight files are byte-for-byte the same."""
    seen: dict[str, str] = {}
    pairs = []
    for folder in folders:
        key = weights_digest(Path(folder))
        if key is None:
            continue
        if key in seen:
            pairs.append((seen[key], folder))
        else:
            seen[key] = folder
    return pairs


def default_comparison(runs: list[RunInfo]) -> list[str]:
    """Compare's starting pair: the newest checkpoint of the newest run with one, against the committed drafter."""
    newest = next((r.checkpoints[-1] for r in runs if r.checkpoints), None)
    pair = [str(newest)] if newest is not None else []
    if DEFAULT_DRAFTER.is_dir():
        pair.append(str(DEFAULT_DRAFTER))
    return pair


# the small set's kind: the target's own responses (no teacher-forced text), the kind the committed drafter's last
# stages trained on; a few thousand teacher-forced tokens moved it the wrong way (assets/notes/issue-42)
DATA_KIND = ["--text-pairs", "false", "--python-files", "0"]


def data_command(folder: Path, shards: int, threads: int = 1) -> list[str]:
    """`python -m tevcore build-data` for a small set: the engine's builder, run as a background process."""
    return [sys.executable, "-m", "tevcore", "build-data", str(folder), "--max-shards", str(int(shards)),
            "--threads", str(int(threads)), *DATA_KIND]


def launch_data(folder: Path, shards: int, threads: int = 1) -> subprocess.Popen:
    """Start building a distillation set in the background; output to <folder>/build-data.log."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / DATA_LOG, "a", encoding="utf-8")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    try:
        return subprocess.Popen(data_command(folder, shards, threads), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=str(Path(__file__).resolve().parents[1]))
    finally:
        log.close()


def data_progress(folder: Path) -> tuple[int, int] | None:
    """(shards written, shards planned) of a data-set build, by the plan its manifest records; None before that."""
    return build_progress(Path(folder))


def checkpoints_signature(runs: list[RunInfo]) -> tuple:
    """What the Compare tab offers from `runs`: every checkpoint and each run's state. When it changes (a run
    wrote a checkpoint or ended), the tab must be redrawn to offer the new drafter."""
    return tuple((str(r.folder), r.state, tuple(str(p) for p in r.checkpoints)) for r in runs)
