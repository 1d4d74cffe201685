"""Writing files and folders so that a failed write (a full disk, a quota, a read-only folder) leaves nothing
half-written behind and fails with one line that names the file.

safetensors and torch.save report a full disk as their own exception types
(a SafetensorError, a RuntimeError from the zip writer), which a caller cannot
tell from a programming error; serialising to bytes first and writing those
with plain file I/O turns every such failure into an OSError of the file.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save as safetensors_bytes

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


def _temporary(path: Path) -> Path:
    """A temporary name beside `path`, unique to this process (two writers never share one)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """`path` holds `data`, or (on any failure) is as it was; a failed write is a `WriteFailed` naming it."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise write_failure(path, err) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> int:
    """A safetensors file written atomically; returns its size in bytes."""
    data = safetensors_bytes(tensors, metadata=metadata)
    write_bytes_atomic(path, data)
    return len(data)


def save_torch(path: str | Path, obj: object) -> None:
    """torch.save, written atomically."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_bytes_atomic(path, buffer.getvalue())


def append_line(path: str | Path, line: str) -> None:
    """Append one line; a failed write is a `WriteFailed` naming the file."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError as err:
        raise write_failure(Path(path), err) from None


@contextmanager
def folder_in_place(final: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside `final`; renamed to `final` (replacing it) when the block ends, removed
    with everything in it when the block fails, so `final` is never empty or half-written."""
    final = Path(final)
    tmp = _temporary(final)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
    except OSError as err:
        raise write_failure(final, err) from None
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
