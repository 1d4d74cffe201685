"""A private folder per participant: their saved traces and uploads, and nobody else's.

A participant never types a path. Their space is a folder with a random name under the host's root, known only
to the server's session that made it; inside it a file is named by a plain file name, checked here. A space is
removed when its session ends (the handle kept in the session is collected) or when it has been idle longer
than the keeper's time to live, whichever comes first.

The root is the room's own: a new or empty folder that the first keeper marks (`MARKER`), never `/`, a system
folder, a folder holding other data or the runs folder (`space_root_problem`, asked before the server starts).
Each server keeps its spaces in a folder of its own under the root, locked (`flock`) while the server lives, so
a sweep removes only this server's idle spaces and the folders of servers that are gone: never a host's file,
never another live room's spaces.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MARKER = ".tevcore-room-spaces"  # in a root the room made or adopted empty: what is under it is the rooms' own
SERVER_FOLDER = re.compile(r"^server-[0-9a-f]{16}$")  # one server's spaces; its LOCK is held while it lives
LOCK = ".lock"
# Folders that hold the system or everyone's files: never a space root, even when empty.
SYSTEM_FOLDERS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt",
                  "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/tmp")


def plain_name(name: str) -> str:
    """`name` when it is a plain file name (letters, digits, . _ -; no separator, no leading dot); else ValueError."""
    if not isinstance(name, str) or not PLAIN_NAME.match(name) or ".." in name:
        raise ValueError(f"{name!r} is not a plain file name (letters, digits, '.', '_', '-'; no folders)")
    return name


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def space_root_problem(root: Path, runs: Path | None = None) -> str | None:
    """Why `root` may not hold participants' spaces (None when it may): a system folder or the home folder, the
    runs folder or a folder inside it or around it, or an existing folder holding anything but the room's own
    (a file, or a folder with other entries and no `MARKER`). Nothing is created or changed."""
    resolved = Path(root).expanduser().resolve()
    home = Path.home().resolve()
    if str(resolved) in SYSTEM_FOLDERS or resolved == home or resolved.parent == resolved:
        return f"space_root {root} is a system folder; give a folder of the room's own, e.g. /tmp/tev-room-spaces"
    if runs is not None:
        runs_resolved = Path(runs).expanduser().resolve()
        if _inside(resolved, runs_resolved) or _inside(runs_resolved, resolved):
            return (f"space_root {root} and the runs folder {runs} overlap; the spaces need a folder of their own "
                    "outside the runs")
    if resolved.exists() and not resolved.is_dir():
        return f"space_root {root} is a file, not a folder"
    if resolved.is_dir() and not (resolved / MARKER).is_file():
        try:
            entries = sorted(entry.name for entry in resolved.iterdir())
        except OSError as err:
            return f"space_root {root} cannot be read: {err.strerror}"
        if entries:
            return (f"space_root {root} holds other data ({len(entries)} entries, e.g. {entries[0]!r}) and is not "
                    "a room's space folder; give a new or empty folder")
    return None


class Space:
    """One participant's folder. Hold it in the participant's session: when it is collected, the folder goes."""

    def __init__(self, folder: Path, on_close: Callable[[Path], None]) -> None:
        self.folder = folder
        self._finalizer = weakref.finalize(self, on_close, folder)

    def path(self, name: str) -> Path:
        """The file `name` inside this space (a plain name only: nothing outside the space can be named)."""
        return self.folder / plain_name(name)

    def files(self, pattern: str = "*") -> list[Path]:
        return sorted(p for p in self.folder.glob(pattern) if p.is_file()) if self.folder.is_dir() else []

    def used_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files())

    def close(self) -> None:
        """Remove the space now (the session ended)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


def _lock_if_free(lock: Path) -> int | None:
    """An open descriptor holding `lock`'s flock, or None when a live process holds it."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class SpaceKeeper:
    """Makes spaces under `root` and removes them when their session ends or after `ttl_s` idle seconds.

    A root holding anything but the room's own is refused (`space_root_problem`); this keeper's spaces live in
    a folder of its own (`server-<random>`), locked while the keeper lives.
    """

    def __init__(self, root: Path, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._touched: dict[Path, float] = {}
        problem = space_root_problem(self.root)
        if problem:
            raise ValueError(problem)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / MARKER).touch()
        staging = self.root / f".server-{secrets.token_hex(8)}.partial"  # not a server folder until it is locked
        staging.mkdir(mode=0o700)
        fd = os.open(staging / LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.folder = self.root / staging.name[1:].removesuffix(".partial")
        os.replace(staging, self.folder)
        self._release = weakref.finalize(self, os.close, fd)  # the server's end unlocks its folder for a sweep

    def open(self) -> Space:
        """A new empty space with a name nobody can guess."""
        folder = self.folder / secrets.token_hex(16)
        folder.mkdir(mode=0o700)
        with self._lock:
            self._touched[folder] = self._clock()
        return Space(folder, self._remove)

    def touch(self, space: Space) -> None:
        """The participant used their space: its idle time starts again."""
        with self._lock:
            if space.folder in self._touched:
                self._touched[space.folder] = self._clock()

    def alive(self, space: Space) -> bool:
        with self._lock:
            return space.folder in self._touched and space.folder.is_dir()

    def _remove(self, folder: Path) -> None:
        with self._lock:
            self._touched.pop(folder, None)
        shutil.rmtree(folder, ignore_errors=True)

    def _gone_servers(self) -> list[Path]:
        """The server folders under the root whose server is gone (their lock is free), removed here."""
        removed = []
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if folder == self.folder or not SERVER_FOLDER.match(folder.name) or not folder.is_dir():
                continue
            fd = _lock_if_free(folder / LOCK)
            if fd is None:
                continue  # a live server's spaces, or not a server folder at all: left alone
            try:
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                os.close(fd)
            removed.append(folder)
        return removed

    def sweep(self) -> list[Path]:
        """Remove this keeper's spaces idle past the time to live, and the folders of servers that are gone;
        returns them. Nothing else under the root is touched."""
        now = self._clock()
        with self._lock:
            stale = [folder for folder, touched in self._touched.items() if now - touched > self.ttl_s]
        for folder in stale:
            self._remove(folder)
        return stale + self._gone_servers()
