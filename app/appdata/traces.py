"""Trace files in memory: the bytes of a download, an uploaded file read back (by the engine's reader, each round
checked against its rule by the registry)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tevcore.engine.records import TRACE_TEXT_LIMIT, RoundRecord, Trace, write_trace
from tevcore.verify.trace_checks import read_trace


def trace_bytes(records: list[RoundRecord], meta: dict | None = None) -> bytes:
    """A trace file's bytes (plain JSONL), written by the engine's writer."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "trace.jsonl", records, meta or {})
        return path.read_bytes()


def trace_from_bytes(data: bytes, name: str = "trace.jsonl", max_text_bytes: int = TRACE_TEXT_LIMIT) -> Trace:
    """Read an uploaded trace file (.jsonl or .jsonl.gz); ValueError when corrupt or its text is over the limit."""
    suffix = ".jsonl.gz" if name.endswith(".gz") else ".jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        try:
            return read_trace(path, max_text_bytes=max_text_bytes)
        except (ValueError, OSError, EOFError) as err:  # name the user's file, not the temporary copy
            raise ValueError(str(err).replace(str(path), name)) from None


def load_trace(source: bytes | str | Path, name: str = "trace.jsonl", max_text_bytes: int = TRACE_TEXT_LIMIT) -> Trace:
    """A trace to replay, from uploaded bytes (named `name`) or a file; ValueError when corrupt, empty or its text
    is over `max_text_bytes`."""
    trace = trace_from_bytes(source, name, max_text_bytes) if isinstance(source, bytes) else \
        read_trace(source, max_text_bytes=max_text_bytes)
    if not trace.rounds:
        raise ValueError("the trace holds no rounds")
    return trace


def trace_settings_text(meta: dict | None, records: list[RoundRecord]) -> str:
    """What a replayed trace was made with: its prompt, temperature, builder, budget, verifier and seed (from the
    trace's header, else from its rounds; a setting neither records is said to be unknown)."""
    meta = meta if isinstance(meta, dict) else {}
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    first = records[0] if records else None

    def setting(name: str):
        if name in config:
            return config[name]
        return getattr(first, name, None) if first is not None else None

    shown = {name: setting(name) for name in ("temperature", "builder", "budget", "verifier", "seed")}
    prompt = meta.get("prompt")
    prompt_text = repr(prompt if len(str(prompt)) <= 160 else str(prompt)[:157] + "...") if prompt else "unknown"
    parts = [f"{name} {value if value is not None else 'unknown'}" for name, value in shown.items()]
    target = f" on {meta['target']}" if meta.get("target") else ""
    return f"This trace was made{target} with prompt {prompt_text} · " + " · ".join(parts)
