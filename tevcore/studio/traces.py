"""Trace files opened for replay: read under the caps by the engine's reader, in a compute-queue turn.

Parsing a trace checks every round against its rule; a trace as large as the text cap takes seconds and its
records hold memory, so it waits its turn like any model computation.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tevcore.engine.records import Trace
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
