"""Output paths checked before any work, so a long run never ends in a write that cannot happen."""

from __future__ import annotations

import os
from pathlib import Path


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_creatable(folder: Path, flag: str) -> None:
    """`folder` exists as a writable folder, or can be made inside one."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise ValueError(f"{flag}: {existing} is a file, so {folder} cannot be a folder")
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{flag}: {existing} is not writable")


def check_output_file(path: str | Path, flag: str, make_parents: bool) -> None:
    """Refuse an output file path that is a folder, lies in a missing folder (unless made) or is not writable."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder: give a file name inside it")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {path} is not writable")
    if not make_parents and not path.parent.is_dir():
        raise ValueError(f"{flag} {path}: the folder {path.parent} does not exist")
    _check_creatable(path.parent, flag)


def check_output_folder(path: str | Path, flag: str) -> None:
    """Refuse an output folder path that is a file or cannot be made."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {path} is a file, not a folder")
    _check_creatable(path, flag)
