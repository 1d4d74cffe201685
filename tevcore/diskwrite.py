"""Writing files and folders so that a failed write (a full disk, a quota, a read-only folder) leaves nothing
half-written behind and fails with one line that names the file.

safetensors and torch.save report a full disk as their own exception types
(a SafetensorError, a RuntimeError from the zip writer), which a caller cannot
tell from a programming error; serialising to bytes first and writing those
with plain file I/O turns every such failure into an OSError of the file.
Files go through `outputs.write_output` (a temporary file of the writer's
own, then a rename); folders through `folder_in_place`.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save as safetensors_bytes

from tevcore.outputs import WriteFailed, temporary_name, write_failure, write_output


def temporary_folder(final: Path) -> Path:
    """A new empty folder of this writer's own beside `final`, named by `outputs.temporary_name`."""
    while True:
        tmp = temporary_name(Path(final))
        try:
            tmp.mkdir(parents=True)
        except FileExistsError:
            continue
        return tmp


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """`path` holds `data`, or (on any failure) is as it was; a failed write is a `WriteFailed` naming it."""

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            handle.write(data)

    try:
        write_output(path, write, overwrite=True)
    except OSError as err:
        raise write_failure(Path(path), err) from None


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
    try:
        tmp = temporary_folder(final)
    except OSError as err:
        raise write_failure(final, err) from None
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except WriteFailed as err:  # named by the folder the user will look for, not by its temporary name
        shutil.rmtree(tmp, ignore_errors=True)
        raise WriteFailed(err.errno, str(err).replace(str(tmp), str(final))) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
