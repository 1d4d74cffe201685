"""Training runs seen from the app (no streamlit): list run folders, read progress, launch the CLI.

A run folder (written by `python -m tevcore train`) holds config.json,
metrics.jsonl, status.json ({state, pid, step, total_steps, started,
updated, error?}), a `.lock` with the owner's pid while training, and
checkpoint folders. The app only reads these files and starts the CLI as a
background process; it never trains in the script thread.
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

LOG_NAME = "train.log"


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


@dataclass
class RunInfo:
    """What the app knows about one run folder."""

    folder: Path
    state: str  # running / finished / crashed / interrupted / starting / not started / unreadable
    step: int = 0
    total: int = 0
    started: float | None = None
    updated: float | None = None
    error: str | None = None
    pid: int | None = None
    checkpoints: list[Path] = field(default_factory=list)
    config: dict | None = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / self.total) if self.total else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Remaining seconds at the mean pace so far (None before the first step)."""
        if not self.step or self.started is None or self.updated is None or self.step >= self.total:
            return None
        return (self.updated - self.started) / self.step * (self.total - self.step)

    @property
    def resumable(self) -> bool:
        return self.state in ("crashed", "interrupted", "stopped") and (self.folder / "config.json").is_file()

    @property
    def running(self) -> bool:
        return self.state in ("running", "starting")


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def checkpoints(folder: Path) -> list[Path]:
    """Usable drafter folders of a run: checkpoint-<step> folders and the final drafter/."""
    found = []
    for path in sorted(folder.glob("checkpoint-*"), key=lambda p: _step_of(p)):
        if path.is_dir() and (path / "config.json").is_file():
            found.append(path)
    final = folder / "drafter"
    if final.is_dir() and (final / "config.json").is_file():
        found.append(final)
    return found


def _step_of(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def run_info(folder: Path) -> RunInfo:
    """Read a run folder; a missing or corrupt status is reported in `state`, never raised."""
    folder = Path(folder)
    config = _read_json(folder / "config.json")
    status_path = folder / "status.json"
    if not status_path.is_file():
        state = "not started" if config is not None else "unreadable"
        return RunInfo(folder, state, config=config, checkpoints=checkpoints(folder),
                       error=None if config is not None else "no status.json or config.json")
    status = _read_json(status_path)
    if status is None:
        return RunInfo(folder, "unreadable", error="status.json is corrupt", config=config,
                       checkpoints=checkpoints(folder))
    state = str(status.get("state", "unknown"))
    pid = status.get("pid")
    info = RunInfo(folder, state, step=int(status.get("step") or 0), total=int(status.get("total_steps") or 0),
                   started=status.get("started"), updated=status.get("updated"), error=status.get("error"),
                   pid=pid, checkpoints=checkpoints(folder), config=config)
    if info.running and not pid_alive(pid):
        info.state = "crashed"
        info.error = info.error or f"the training process {pid} is gone without finishing"
    return info


def list_runs(root: Path) -> list[RunInfo]:
    """Every training run folder under `root` (folders with a config.json or status.json)."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [run_info(p) for p in sorted(root.iterdir())
            if p.is_dir() and ((p / "status.json").exists() or (p / "config.json").exists())
            and not (p / "manifest.json").exists()]
    return sorted(runs, key=lambda r: r.updated or 0, reverse=True)


def runs_table(runs: list[RunInfo]) -> pd.DataFrame:
    rows = []
    for r in runs:
        rows.append({"run": r.folder.name, "state": r.state, "step": f"{r.step}/{r.total}",
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
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "manifest.json").is_file())


def busy_reason(folder: Path, own: subprocess.Popen | None = None) -> str | None:
    """Why a new training process must not start on `folder` (None if it may).

    `own` is the process this app started on `folder` earlier, if any: while it
    runs, it refuses a start before its lock or status file appears.
    """
    folder = Path(folder)
    if own is not None and own.poll() is None:
        return f"{folder} is already training (started from this app, process {own.pid})"
    lock = folder / ".lock"
    if lock.is_file():
        try:
            pid = int(lock.read_text().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid_alive(pid):
            return f"{folder} is in use by training process {pid} (its lock file is held)"
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


def plan(cmd: list[str]) -> tuple[bool, str]:
    """The CLI's own dry run of `cmd`, in-process (it validates the config and reads the data manifest only).

    Returns (ok, the printed plan or the reason it was refused).
    """
    import contextlib
    import io

    from tevcore.train import train_cli

    parser = cli_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(cmd[4:] + ([] if "--dry-run" in cmd else ["--dry-run"]))
    except SystemExit:
        return False, err.getvalue().strip() or "the training options were refused"
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = train_cli.run(args)
    except (ValueError, FileNotFoundError, KeyError, OSError) as error:
        return False, f"{type(error).__name__}: {error}"
    return code in (0, None), out.getvalue().strip()


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


def data_command(folder: Path, shards: int, threads: int = 1) -> list[str]:
    """`python -m tevcore build-data` for a small set: the engine's builder, run as a background process."""
    return [sys.executable, "-m", "tevcore", "build-data", str(folder), "--max-shards", str(int(shards)),
            "--threads", str(int(threads))]


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


def data_progress(folder: Path) -> int:
    """Shards written so far, by the engine's own shard names."""
    from tevcore.train.data import shard_path

    count = 0
    while shard_path(Path(folder), count).is_file():
        count += 1
    return count
