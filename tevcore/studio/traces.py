"""Trace files: opened for replay (read under the caps by the engine's reader, in a compute-queue turn), written
for a download or into a participant's folder, and what a trace was made with, in words.

Parsing a trace checks every round against its rule; a trace as large as the text cap takes seconds and its
records hold memory, so it waits its turn like any model computation. Writing one is the engine's writer on
rounds the page already holds (no model, no queue).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tevcore.engine.records import RoundRecord, Trace, write_trace
from tevcore.studio.reader import Upload
from tevcore.studio.turns import Seat, queue_turn
from tevcore.verify.trace_checks import read_trace


def open_trace(seat: Seat, upload: Upload) -> Trace:
    """The trace in `upload` (.jsonl or .jsonl.gz) with every round checked; ValueError (a CapExceeded past the
    text cap) naming the participant's file when it is corrupt, empty or over the cap."""
    suffix = ".jsonl.gz" if upload.gzipped else ".jsonl"
    with queue_turn(seat), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(upload.data)
        try:
            trace = read_trace(path, upload.name, max_text_bytes=upload.text_cap)
        except (ValueError, OSError, EOFError) as err:
            raise ValueError(str(err).replace(str(path), upload.name)) from None
    if not trace.rounds:
        raise ValueError(f"{upload.name} holds no rounds")
    return trace


def save_trace(folder: Path, records: list[RoundRecord], meta: dict | None = None) -> Path:
    """Write the rounds as a new gzipped trace in `folder` (made if missing), named by the time and never over an
    existing file; OSError when the folder cannot be written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = folder / f"trace-{stamp}.jsonl.gz", 1
    while path.exists():  # two saves in one second: the first file stays
        n += 1
        path = folder / f"trace-{stamp}-{n}.jsonl.gz"
    return write_trace(path, records, meta or {})


def trace_bytes(records: list[RoundRecord], meta: dict | None = None) -> bytes:
    """A trace file's bytes (plain JSONL), written by the engine's writer."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "trace.jsonl", records, meta or {})
        return path.read_bytes()


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
