"""Where results are written: output paths checked before any work, so a long run never ends in a write that
cannot happen, and one way of writing a result (a temporary file per writer, then an atomic publish)."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable



FULL = (errno.ENOSPC, errno.EDQUOT)


class WriteFailed(OSError):
    """A write that could not happen; its message is the whole story (the file, the reason, the free space)."""

    def __str__(self) -> str:
        return str(self.strerror)


def write_failure(path: Path, err: OSError) -> WriteFailed:
    """The one-line error for `err` raised while writing `path`."""
    if isinstance(err, WriteFailed):
        return err
    reason = err.strerror or str(err)
    if err.errno in FULL:
        reason += f" ({_free(path)} free there); free some space and run the same command again"
    return WriteFailed(err.errno, f"cannot write {path}: {reason}")


def _free(path: Path) -> str:
    folder = Path(path)
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        return f"{shutil.disk_usage(folder).free / 1e6:.1f} MB"
    except OSError:
        return "unknown space"


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
    """Refuse an output file path that is a folder (or written as one, ending in '/'), lies under a file, in a
    missing folder (unless made) or is not writable."""
    if isinstance(path, str) and path.endswith(("/", os.sep)):
        raise ValueError(f"{flag} {path} ends in '/', so it names a folder: give a file name inside it")
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder: give a file name inside it")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {path} is not writable")
    existing = _nearest_existing(path.parent)
    if not existing.is_dir():  # a file on the way is named as such, not as a missing folder
        raise ValueError(f"{flag} {path}: {existing} is a file, so {path.parent} cannot be a folder")
    if not make_parents and not path.parent.is_dir():
        raise ValueError(f"{flag} {path}: the folder {path.parent} does not exist")
    _check_creatable(path.parent, flag)


def check_output_folder(path: str | Path, flag: str) -> None:
    """Refuse an output folder path that is a file or cannot be made."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {path} is a file, not a folder")
    _check_creatable(path, flag)


def check_not_replacing(path: str | Path, flag: str, force: bool) -> None:
    """Refuse an output that already exists unless `force`: a second run never silently replaces the first."""
    path = Path(path).expanduser()
    if path.exists() and not force:
        raise ValueError(f"{flag} {path} already exists: pass --force to replace it, or give another {flag}")


def beside(path: Path) -> Path:
    """The first free name next to `path` (`bench.json` -> `bench-2.json`, `t.jsonl.gz` -> `t-2.jsonl.gz`)."""
    suffix = ".jsonl.gz" if path.name.endswith(".jsonl.gz") else path.suffix
    stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
    number = 2
    while (candidate := path.with_name(f"{stem}-{number}{suffix}")).exists():
        number += 1
    return candidate


def _publish(tmp: Path, path: Path, overwrite: bool) -> Path:
    """Move a finished temporary file to `path`; without `overwrite`, a file that appeared there meanwhile
    (another writer) is kept and this result goes beside it. Returns where the result now is."""
    if overwrite:
        os.replace(tmp, path)
        return path
    while True:
        try:
            os.link(tmp, path)  # atomic, and fails where a file exists: no check-then-replace race
        except FileExistsError:
            path = beside(path)
            continue
        except OSError:  # a file system without hard links: the race window is this check
            if path.exists():
                path = beside(path)
                continue
            os.replace(tmp, path)
        return path


def temporary_name(path: Path) -> Path:
    """The package's one name for a file or folder being written before it is published as `path`: hidden,
    beside it (so the publishing rename stays on one file system), unique to this writer (its process id and
    a random part), ending in `.partial` (so a run folder's clean-up finds what a killed writer left)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")


def _new_temporary(path: Path) -> Path:
    """An empty file of this writer's own beside `path`, created with the process's usual file mode."""
    while True:
        tmp = temporary_name(path)
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # mode 0o666 less the umask
        except FileExistsError:
            continue
        return tmp


def write_output(path: str | Path, write: Callable[[Path], None], overwrite: bool = False) -> Path:
    """Call `write(tmp)` on a temporary file unique to this writer in `path`'s folder, then publish it.

    Two writers of one output never share a temporary file, a reader never sees
    a half-written one, and a failed or interrupted write leaves nothing behind.
    Without `overwrite` an existing output is never replaced: the result goes
    beside it. Returns where the result now is.
    """
    path = Path(path).expanduser()
    try:
        tmp = _new_temporary(path)
    except OSError as err:
        raise write_failure(path, err) from None
    try:
        write(tmp)
        return _publish(tmp, path, overwrite)
    except OSError as err:  # a full disk, a quota: one line naming the result, not the temporary file
        raise write_failure(path, err) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | Path, data: Any, overwrite: bool = False) -> Path:
    """A JSON file (a result, a run folder's status or pointer) written through `write_output`."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=1))

    return write_output(path, write, overwrite)


def written(path: Path, wanted: str | Path, partial: bool = False) -> str:
    """The line that reports a written result, saying so when it went beside an output that appeared meanwhile."""
    line = f"wrote {path}" + (" (partial: the run was interrupted)" if partial else "")
    if Path(path) != Path(wanted).expanduser():
        line += f" ({wanted} appeared during the run, from another writer, and was kept)"
    return line
