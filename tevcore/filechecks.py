"""Is a file still what was written: a safetensors file's header against its size, and a file's SHA-256.

A file put in place by a rename was complete once; these checks tell
whether it still is after a disk error, a truncating copy or an edit.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file's header does not describe the whole file (None when it does)."""
    size = Path(path).stat().st_size
    with open(path, "rb") as handle:
        start = handle.read(8)
        if len(start) < 8:
            return f"{size} bytes, too short for a safetensors header"
        length = struct.unpack("<Q", start)[0]
        if length > size - 8:
            return f"its header claims {length} bytes but the file has {size}"
        try:
            header = json.loads(handle.read(length))
            end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as err:
            return f"its header is unreadable ({type(err).__name__})"
    if 8 + length + end != size:
        return f"{size} bytes where its header needs {8 + length + end}"
    return None
