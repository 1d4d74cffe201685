"""Trace files in memory: the bytes of a download, an uploaded file read back (by the engine's reader, each round
checked against its rule by the registry)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tevcore.engine.records import RoundRecord, Trace, write_trace
from tevcore.verify.trace_checks import read_trace


def trace_bytes(records: list[RoundRecord], meta: dict | None = None) -> bytes:
    """A trace file's bytes (plain JSONL), written by the engine's writer."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "trace.jsonl", records, meta or {})
        return path.read_bytes()


def trace_from_bytes(data: bytes, name: str = "trace.jsonl") -> Trace:
    """Read an uploaded trace file (.jsonl or .jsonl.gz); ValueError when corrupt."""
    suffix = ".jsonl.gz" if name.endswith(".gz") else ".jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        try:
            return read_trace(path)
        except (ValueError, OSError, EOFError) as err:  # name the user's file, not the temporary copy
            raise ValueError(str(err).replace(str(path), name)) from None


def load_trace(source: bytes | str | Path, name: str = "trace.jsonl") -> Trace:
    """A trace to replay, from uploaded bytes (named `name`) or a file; ValueError when corrupt or empty."""
    trace = trace_from_bytes(source, name) if isinstance(source, bytes) else read_trace(source)
    if not trace.rounds:
        raise ValueError("the trace holds no rounds")
    return trace
