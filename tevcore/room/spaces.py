"""A private folder per participant: their saved traces and uploads, and nobody else's.

A participant never types a path. Their space is a folder with a random name under the host's root, known only
to the server's session that made it; inside it a file is named by a plain file name, checked here. A space is
removed when its session ends (the handle kept in the session is collected) or when it has been idle longer
than the keeper's time to live, whichever comes first.
"""

from __future__ import annotations

import re
import secrets
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def plain_name(name: str) -> str:
    """`name` when it is a plain file name (letters, digits, . _ -; no separator, no leading dot); else ValueError."""
    if not isinstance(name, str) or not PLAIN_NAME.match(name) or ".." in name:
        raise ValueError(f"{name!r} is not a plain file name (letters, digits, '.', '_', '-'; no folders)")
    return name


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


class SpaceKeeper:
    """Makes spaces under `root` and removes them when their session ends or after `ttl_s` idle seconds."""

    def __init__(self, root: Path, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._touched: dict[Path, float] = {}

    def open(self) -> Space:
        """A new empty space with a name nobody can guess."""
        self.root.mkdir(parents=True, exist_ok=True)
        folder = self.root / secrets.token_hex(16)
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

    def sweep(self) -> list[Path]:
        """Remove every space idle past the time to live, and leftovers of an earlier server; returns them."""
        now = self._clock()
        with self._lock:
            stale = [folder for folder, touched in self._touched.items() if now - touched > self.ttl_s]
            known = set(self._touched)
        leftovers = [p for p in self.root.iterdir() if p.is_dir() and p not in known] if self.root.is_dir() else []
        for folder in stale + leftovers:
            self._remove(folder)
        return stale + leftovers
