"""The run folder: config, status.json, a lock against a second run, atomic checkpoints.

Layout: config.json, metrics.jsonl, status.json, .lock, checkpoint-<step>/
(drafter files + trainer.pt) with `latest.json` naming the newest complete one,
and drafter/ at the end. A checkpoint folder is written under a temporary
name and renamed, and `latest.json` is replaced atomically, so an interruption at
any moment (or a full disk) leaves the previous checkpoint usable and no
empty or half-written checkpoint folder. A run that fails before its first
step takes back the config.json it wrote, so the corrected command is
accepted in the same folder (see `held_run_folder`).

status.json is written by the training process only and read by anyone
(the app): {state (starting, running, finished, interrupted, failed, crashed), pid, step, total_steps, started, updated, error?} plus
the clock of `RunClock` (active_seconds, start_step, steps_began), so a
reader can show elapsed time and an ETA that stay true across resumes
without guessing. The readers below (`read_status`, `usable_drafters`,
`lock_holder`) are the one way to look into a run folder from outside.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import torch

from tevcore.diskwrite import append_line, folder_in_place, save_torch
from tevcore.outputs import write_json
from tevcore.proposers.block import BlockDrafter, load_drafter, save_drafter
from tevcore.target.loading import Target

TRAINER_STATE = "trainer.pt"
CONFIG = "config.json"
METRICS = "metrics.jsonl"
STATUS = "status.json"
LATEST = "latest.json"
FINAL_DRAFTER = "drafter"


class RunState(str, Enum):
    """How a run stands: the states its process writes to status.json, and those a reader finds without one.

    A string enum, so status.json holds the plain word (the value) and older files read back unchanged.
    """

    STARTING = "starting"  # the process is loading (target, data) before its first step
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # stopped by Ctrl-C or a stop signal: resumable from its newest checkpoint
    FAILED = "failed"  # it could not learn (a non-finite loss); its last good checkpoint kept
    CRASHED = "crashed"  # an error ended it, or its process is gone without a last word
    NOT_STARTED = "not started"  # a config but no status yet (read, never written)
    UNREADABLE = "unreadable"  # no status and no config, or a corrupt status (read, never written)
    UNKNOWN = "unknown"  # a status naming no state this code knows (read, never written)

    @classmethod
    def read(cls, value: object) -> RunState:
        """The state a status.json names (UNKNOWN for anything else)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    def __str__(self) -> str:
        return self.value


def append_metrics(folder: Path, metrics: dict) -> None:
    append_line(Path(folder) / METRICS, json.dumps(metrics))


def pid_alive(pid: int | None) -> bool:
    """Whether process `pid` exists (one owned by another user counts as alive)."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, TypeError):
        return True
    return True


class RunFolderBusy(ValueError, RuntimeError):
    """Another live training process holds the run folder (a usage error: it prints as one line)."""


class RunLock:
    """An exclusive lock file holding the owner's pid; a lock left by a dead process is taken over.

    The file is also `flock`ed while held: the kernel drops that lock when its
    process dies (even by SIGKILL), so two starts can never both win, and a
    dead owner's file is simply taken. A pid written by a live process that
    holds no flock (an older tevcore) is still respected.
    """

    def __init__(self, folder: Path, work: str = "training") -> None:
        self.path = Path(folder) / ".lock"
        self.work = work  # what holds the folder, for the refusal: "training", "data build"
        self._fd: int | None = None

    def _refuse(self, pid: int) -> None:
        raise RunFolderBusy(f"{self.path.parent} is in use by {self.work} process {pid}; "
                            "wait for it, stop it, or choose another folder")

    def acquire(self) -> None:
        for _ in range(5):
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self._refuse(self._owner())
            if not self.path.exists() or os.fstat(fd).st_ino != os.stat(self.path).st_ino:
                os.close(fd)  # the owner released (unlinked) it between our open and our flock: try again
                continue
            owner = self._owner()
            if owner and owner != os.getpid() and pid_alive(owner):
                os.close(fd)
                self._refuse(owner)
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            self._fd = fd
            return
        raise RuntimeError(f"could not take the lock {self.path}")

    def _owner(self) -> int:
        try:
            return int(self.path.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def release(self) -> None:
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self._fd)  # unlink first: a waiting process then sees a new inode and retries
        self._fd = None


@contextmanager
def held_run_folder(folder: Path, owner: bool = True) -> Iterator[Path]:
    """The run folder, made and locked for one run by its owner (rank 0; other DDP ranks only work in it).

    A run that fails before its first step (a starting drafter that does not
    fit, damaged data, Ctrl-C while loading, a crash or a full disk in step 1)
    takes back what it committed: the config.json and metrics it wrote, and
    the folder itself when it made it and nothing else is left; the error stays
    in status.json (crashed or interrupted). So the corrected command is
    accepted in the same folder, and nothing a user wrote is lost. A run with
    steps behind it keeps everything and resumes as before.
    """
    folder = Path(folder)
    if not owner:
        yield folder
        return
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = RunLock(folder)
    lock.acquire()
    fresh, before = not (folder / CONFIG).exists(), read_status(folder)
    try:
        # a killed writer's (`.tmp`: a folder's name before the one scheme): the lock says no writer lives
        for stale in [*folder.glob(".*.tmp"), *folder.glob(".*.partial")]:
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        yield folder
    except BaseException as err:
        _take_back_start(folder, fresh, before, err)
        lock.release()
        if made and not any(folder.iterdir()):
            folder.rmdir()
        raise
    lock.release()


def _take_back_start(folder: Path, fresh: bool, before: dict, err: BaseException) -> None:
    """Undo a run that failed before its first step (see `held_run_folder`); keep its error in status.json."""
    status = read_status(folder)
    if status.get("state") == RunState.STARTING and status.get("pid") == os.getpid():  # it failed while setting up
        stopped = isinstance(err, KeyboardInterrupt)
        status.update(state=(RunState.INTERRUPTED if stopped else RunState.CRASHED).value, step=before.get("step", 0), updated=time.time(),
                      **({} if stopped else {"error": f"{type(err).__name__}: {err}"}))
        try:
            write_json(folder / STATUS, status, overwrite=True)
        except OSError:
            pass
    if fresh and done_steps(folder) == 0:
        for name in (CONFIG, METRICS):
            (folder / name).unlink(missing_ok=True)


@dataclass
class RunClock:
    """The time a run has spent on the clock, across the processes that trained it.

    A resumed run keeps the active seconds its earlier processes spent (read
    from the status they left), and this process's own pace counts only from
    its first step (`steps_began`, after loading), so elapsed time and ETA stay
    true after a resume: a reader needs no guess about earlier processes.
    """

    started: float  # this process began (wall clock)
    earlier_seconds: float = 0.0  # active seconds of the processes before this one
    start_step: int = 0  # the step this process resumes from (its checkpoint's)
    steps_began: float | None = None  # when this process began its first step

    @classmethod
    def begin(cls, folder: Path) -> RunClock:
        """The clock of a process starting on `folder` (reads the status and checkpoint pointer it finds)."""
        earlier = read_status(folder).get("active_seconds")
        earlier = float(earlier) if isinstance(earlier, (int, float)) and not isinstance(earlier, bool) else 0.0
        return cls(time.time(), earlier, checkpoint_step(folder))

    def steps_begin(self) -> None:
        self.steps_began = time.time()

    def fields(self, now: float) -> dict:
        return {"started": self.started, "active_seconds": self.earlier_seconds + now - self.started,
                "start_step": self.start_step, "steps_began": self.steps_began}


def write_status(folder: Path, state: RunState, step: int, total: int, clock: RunClock, **extra) -> None:
    now = time.time()
    status = {"state": RunState(state).value, "pid": os.getpid(), "step": step, "total_steps": total, "updated": now,
              **clock.fields(now), **extra}
    write_json(Path(folder) / STATUS, status, overwrite=True)


def _last_words(folder: Path, state: RunState, total: int, clock: RunClock, **extra) -> None:
    """A status written while a run fails: best effort, so a full disk never hides the failure's own error."""
    try:
        write_status(folder, state, done_steps(folder), total, clock, **extra)
    except OSError:
        pass


def read_status(folder: Path) -> dict:
    """status.json as a dict ({} when it is missing or unreadable)."""
    try:
        status = json.loads((Path(folder) / STATUS).read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def read_saved_config(folder: Path) -> dict:
    """The config.json a run folder holds, or a one-line error naming it (a damaged file is never overwritten)."""
    path = Path(folder) / CONFIG
    try:
        data = json.loads(path.read_text())
    except (ValueError, RecursionError) as err:
        raise ValueError(f"{path} is damaged ({type(err).__name__}); restore it, or delete it to start "
                         "this folder's run over") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a training config (a JSON object); restore it, or delete it to start "
                         "this folder's run over")
    return data


def done_steps(folder: Path) -> int:
    """The last step status.json reports (0 before the first)."""
    step = read_status(folder).get("step", 0)
    return step if isinstance(step, int) else 0


class TrainingFailed(ValueError, RuntimeError):
    """A run that cannot learn (a non-finite loss): it ends with status "failed", its last good checkpoint kept,
    and the CLI says why in one line."""


@contextmanager
def reported_end(folder: Path, total: int, clock: RunClock, writes: bool = True) -> Iterator[None]:
    """The run's last status, however its steps end: finished, interrupted (Ctrl-C, or a stop signal the CLI
    turns into one), failed (it could not learn: `TrainingFailed`) or crashed (with the error). `writes` is
    False on the DDP ranks that do not own the folder."""
    try:
        yield
    except KeyboardInterrupt:
        if writes:
            _last_words(folder, RunState.INTERRUPTED, total, clock)
        raise
    except TrainingFailed as err:
        if writes:
            _last_words(folder, RunState.FAILED, total, clock, error=str(err))
        raise
    except BaseException as err:
        if writes:
            _last_words(folder, RunState.CRASHED, total, clock, error=f"{type(err).__name__}: {err}")
        raise
    if writes:
        write_status(folder, RunState.FINISHED, done_steps(folder), total, clock)


def save_checkpoint(folder: Path, drafter, optimizer: torch.optim.Optimizer, step: int,
                    save: Callable[[object, Path], object] | None = None, keep_older: bool = False) -> Path:
    """checkpoint-<step>/ = the drafter as `save` writes it (default: a block drafter's files; a DFlash run: the
    published format) + trainer.pt. Older checkpoints are deleted unless `keep_older`."""
    folder = Path(folder)
    final = folder / f"checkpoint-{step}"
    with folder_in_place(final) as tmp:
        (save or save_drafter)(drafter, tmp)
        save_torch(tmp / TRAINER_STATE, {"step": step, "optimizer": optimizer.state_dict()})
    write_json(folder / LATEST, {"checkpoint": final.name, "step": step}, overwrite=True)
    for old in [] if keep_older else folder.glob("checkpoint-*"):
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def save_final(folder: Path, drafter, save: Callable[[object, Path], object] | None = None) -> Path:
    """drafter/ = the trained drafter as `save` writes it, put in place whole (never an empty or partial folder)."""
    final = Path(folder) / FINAL_DRAFTER
    with folder_in_place(final) as tmp:
        (save or save_drafter)(drafter, tmp)
    return final


def latest_checkpoint(folder: Path) -> Path | None:
    pointer = Path(folder) / LATEST
    if not pointer.is_file():
        return None
    path = Path(folder) / json.loads(pointer.read_text())["checkpoint"]
    if not (path / TRAINER_STATE).is_file():
        raise ValueError(f"{pointer} names {path}, which is incomplete; delete latest.json to start over")
    return path


def load_checkpoint(path: Path, target: Target) -> tuple[BlockDrafter, dict]:
    return load_drafter(path, target), load_trainer_state(path)


def load_trainer_state(path: Path) -> dict:
    """The step and optimizer state a checkpoint folder holds beside its drafter."""
    try:
        state = torch.load(path / TRAINER_STATE, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a damaged pickle
        raise ValueError(f"{path / TRAINER_STATE} is damaged ({err}); delete the checkpoint to start over") from None
    return state


def checkpoint_step(folder: Path) -> int:
    """The step of the checkpoint `latest.json` names (0 when none): where the next process resumes."""
    try:
        return int(json.loads((Path(folder) / LATEST).read_text()).get("step", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def usable_drafters(folder: Path) -> list[Path]:
    """The drafters a run folder offers: the newest complete checkpoint (by `latest.json`), then the final one."""
    found = []
    try:
        newest = latest_checkpoint(folder)
    except (OSError, ValueError, KeyError, TypeError):
        newest = None  # a damaged pointer or an incomplete checkpoint offers nothing
    if newest is not None and (newest / "config.json").is_file():
        found.append(newest)
    final = Path(folder) / FINAL_DRAFTER
    if (final / "config.json").is_file():
        found.append(final)
    return found


def lock_holder(folder: Path) -> int | None:
    """The live process holding the folder's lock, if any (a stale lock file names a dead pid: None)."""
    owner = RunLock(folder)._owner()
    return owner if pid_alive(owner) else None
