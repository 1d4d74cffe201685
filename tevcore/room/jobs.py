"""Background jobs (training runs, data builds) with an owner each, a cap on how many run, and a host secret.

On a shared server a job is one process holding a model and cores for minutes or hours, so: participants start
none unless the host has unlocked jobs for them (the host's secret, entered once); at most `cap` jobs run at
once, server-wide; only whoever started a job, or the host, may stop it or start another on its folder (a
resume). The board writes what it started to a small JSON registry, so a restarted server finds its jobs again
and shows them as such; `end_all` ends every running job when the server stops.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from tevcore.room.secret import SecretCheck

HOST = "host"  # the owner name of a job the host started


class JobRefused(ValueError):
    """A start, stop or resume this participant may not make; the message is one line saying why."""


@dataclass
class Job:
    """One background process the board started (or found again after a restart)."""

    id: str
    kind: str  # "train" or "data"
    owner: str  # the participant's session key, or HOST
    folder: str
    command: list[str]
    pid: int
    started: float
    found_again: bool = False  # started by an earlier server process, found running at this one's start
    exit_code: int | None = None
    _process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    @property
    def process(self) -> subprocess.Popen | None:
        """The process handle, when this server started the job (None for one found again after a restart)."""
        return self._process

    @property
    def running(self) -> bool:
        if self.exit_code is not None:
            return False
        if self._process is not None:
            code = self._process.poll()  # also reaps a finished child
            if code is not None:
                self.exit_code = code
                return False
            return True
        return _same_process_alive(self.pid, self.command)

    def record(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_process"}


def _same_process_alive(pid: int, command: list[str]) -> bool:
    """Whether `pid` still runs `command` (a reused pid running something else is not the job)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc here: the pid's existence is all there is to go on
    return [part.decode(errors="replace") for part in cmdline if part] == list(command)


class JobBoard:
    """The server's jobs: start under the cap and the lock, stop or resume by owner or host, find again."""

    def __init__(self, registry: Path, cap: int, host_secret: str | None) -> None:
        self.registry = Path(registry)
        self.cap = cap
        self._secret = SecretCheck(host_secret)
        self.open_to_participants = False  # the host's switch: participants may start jobs of their own
        self._lock = threading.Lock()
        self._jobs: list[Job] = self._found_again()
        self._save()

    # -------------------------------------------------------------- who may
    def unlock(self, secret: str, guesser: str = "") -> bool:
        """Whether `secret` is the host's (compared in constant time; no secret set: nothing unlocks); a guess too
        soon after wrong ones is refused unchecked (`TooManyGuesses`, a ValueError saying when to try again)."""
        return self._secret.check(secret, guesser)

    @staticmethod
    def may_control(job: Job, who: str, is_host: bool) -> bool:
        return is_host or job.owner == who

    # -------------------------------------------------------------- jobs
    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs)

    def running(self) -> list[Job]:
        with self._lock:
            return [job for job in self._jobs if job.running]

    def last_on(self, folder: Path) -> Job | None:
        key = str(Path(folder).resolve())
        with self._lock:
            return next((job for job in reversed(self._jobs) if job.folder == key), None)

    def start(self, who: str, kind: str, folder: Path, command: list[str], log: Path, unlocked: bool,
              is_host: bool = False, cwd: Path | None = None) -> Job:
        """Start `command` in the background (output to `log`), or refuse in one line (JobRefused)."""
        if not (unlocked or is_host):
            raise JobRefused("training and data builds are the host's: enter the host secret to unlock them")
        key = str(Path(folder).resolve())
        with self._lock:
            running = [job for job in self._jobs if job.running]
            same = next((job for job in running if job.folder == key), None)
            if same is not None:
                raise JobRefused(f"{Path(key).name} already has a running {same.kind} job (process {same.pid})")
            earlier = next((job for job in reversed(self._jobs) if job.folder == key), None)
            if earlier is not None and not self.may_control(earlier, who, is_host):
                raise JobRefused(f"{Path(key).name} was started by another participant: only they or the host "
                                 "may resume it")
            if len(running) >= self.cap:
                raise JobRefused(f"the runs folder {self.registry.parent.name} runs at most {self.cap} "
                                 f"job{'s' if self.cap != 1 else ''} at once and {len(running)} "
                                 f"{'is' if len(running) == 1 else 'are'} running: wait for it to end or ask the host")
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a", encoding="utf-8") as out:
                env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                           start_new_session=True, cwd=str(cwd) if cwd else None)
            job = Job(secrets.token_hex(6), kind, HOST if is_host else who, key, list(command), process.pid,
                      time.time(), _process=process)
            self._jobs.append(job)
            self._save_locked()
        return job

    def stop(self, job: Job, who: str, is_host: bool) -> None:
        """Send the job's process group a stop signal (the trainer then saves a resumable state)."""
        if not self.may_control(job, who, is_host):
            raise JobRefused("only whoever started this job, or the host, may stop it")
        if job.running:
            _signal_group(job.pid, signal.SIGTERM)

    def end_all(self, wait_s: float = 10.0) -> None:
        """Stop every running job (the server is stopping), waiting up to `wait_s` for them to end."""
        running = self.running()
        for job in running:
            _signal_group(job.pid, signal.SIGTERM)
        deadline = time.time() + wait_s
        for job in running:
            while job.running and time.time() < deadline:
                time.sleep(0.1)
            if job.running:
                _signal_group(job.pid, signal.SIGKILL)
        self._save()

    # -------------------------------------------------------------- the registry
    def _found_again(self) -> list[Job]:
        """The registry's jobs that still run (started by an earlier server, or by another one on this folder)."""
        try:
            records = json.loads(self.registry.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return []
        found = []
        for record in records if isinstance(records, list) else []:
            try:
                job = Job(**{**record, "found_again": True})
            except TypeError:
                continue
            if job.exit_code is None and job.running:
                found.append(job)
        return found

    def _save(self) -> None:
        with self._lock:
            self._save_locked()

    def _save_locked(self) -> None:
        known = {job.id for job in self._jobs}  # another live server's jobs on this folder stay recorded
        records = [job.record() for job in self._jobs if job.running]
        records += [job.record() for job in self._found_again() if job.id not in known]
        if not records and not self.registry.exists():  # a folder merely looked at is left as it was
            return
        self.registry.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.registry.with_suffix(".tmp")
        temporary.write_text(json.dumps(records, indent=1))
        temporary.replace(self.registry)


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)  # the job leads its own session: its children stop too
    except (ProcessLookupError, PermissionError):
        pass
