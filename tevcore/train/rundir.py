"""The run folder: config, status.json, a lock against a second run, atomic checkpoints.

Layout: config.json, metrics.jsonl, status.json, .lock, checkpoint-<step>/
(drafter files + trainer.pt) with `latest.json` naming the newest complete one,
and drafter/ at the end. A checkpoint folder is written under a temporary
name and renamed, and `latest.json` is replaced atomically, so an interruption at
any moment leaves the previous checkpoint usable.

status.json is written by the training process only and read by anyone
(the app): {state, pid, step, total_steps, started, updated, error?} plus
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
from pathlib import Path

import torch

from tevcore.proposers.block import BlockDrafter, load_drafter, save_drafter
from tevcore.target.loading import Target

TRAINER_STATE = "trainer.pt"
STATUS = "status.json"
LATEST = "latest.json"
FINAL_DRAFTER = "drafter"


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


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

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / ".lock"
        self._fd: int | None = None

    def _refuse(self, pid: int) -> None:
        raise RunFolderBusy(f"{self.path.parent} is in use by training process {pid}; "
                            "wait for it, stop it, or choose another run folder")

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
        try:
            earlier = float((read_status(folder) or {}).get("active_seconds") or 0.0)
        except (ValueError, TypeError):
            earlier = 0.0
        return cls(time.time(), earlier, checkpoint_step(folder))

    def steps_begin(self) -> None:
        self.steps_began = time.time()

    def fields(self, now: float) -> dict:
        return {"started": self.started, "active_seconds": self.earlier_seconds + now - self.started,
                "start_step": self.start_step, "steps_began": self.steps_began}


def write_status(folder: Path, state: str, step: int, total: int, clock: RunClock, **extra) -> None:
    now = time.time()
    write_json_atomic(Path(folder) / STATUS, {
        "state": state, "pid": os.getpid(), "step": step, "total_steps": total, "updated": now,
        **clock.fields(now), **extra})


def read_status(folder: Path) -> dict | None:
    """status.json as a dict; None when there is none; ValueError when it is not a JSON object."""
    path = Path(folder) / STATUS
    try:
        status = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is unreadable ({err})") from None
    if not isinstance(status, dict):
        raise ValueError(f"{path} is not a JSON object")
    return status


def done_steps(folder: Path) -> int:
    """The last step status.json reports (0 before the first)."""
    return int((read_status(folder) or {}).get("step", 0))


@contextmanager
def reported_end(folder: Path, total: int, clock: RunClock, writes: bool = True) -> Iterator[None]:
    """The run's last status, however its steps end: finished, interrupted (Ctrl-C, or a stop signal the CLI
    turns into one) or crashed (with the error). `writes` is False on the DDP ranks that do not own the folder."""
    try:
        yield
    except KeyboardInterrupt:
        if writes:
            write_status(folder, "interrupted", done_steps(folder), total, clock)
        raise
    except BaseException as err:
        if writes:
            write_status(folder, "crashed", done_steps(folder), total, clock, error=f"{type(err).__name__}: {err}")
        raise
    if writes:
        write_status(folder, "finished", done_steps(folder), total, clock)


def save_checkpoint(folder: Path, drafter, optimizer: torch.optim.Optimizer, step: int,
                    save: Callable[[object, Path], object] | None = None) -> Path:
    """checkpoint-<step>/ = the drafter as `save` writes it (default: a block drafter's files; a DFlash run: the
    published format) + trainer.pt."""
    folder = Path(folder)
    final = folder / f"checkpoint-{step}"
    tmp = folder / f".checkpoint-{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (save or save_drafter)(drafter, tmp)
    torch.save({"step": step, "optimizer": optimizer.state_dict()}, tmp / TRAINER_STATE)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    write_json_atomic(folder / LATEST, {"checkpoint": final.name, "step": step})
    for old in folder.glob("checkpoint-*"):
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
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
