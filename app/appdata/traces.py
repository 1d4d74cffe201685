"""Trace files in memory: the bytes of a download and what a trace was made with. An uploaded file is read back by
the studio (`tevcore.studio.reader`, `tevcore.studio.traces`), under the server's caps and in a queue turn."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tevcore.engine.records import RoundRecord, write_trace


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
