"""Records of speculative rounds and trace files (JSONL, optionally gzipped).

A trace file is one header line `{"schema": ..., "version": ..., "meta": {...}}`
followed by one `RoundRecord` per line. Each record carries the tree, its
target flow and the decoded token strings, so the flow can be recomputed and
any page can replay a run without a model.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from tevcore.engine.flow import TargetFlow
from tevcore.engine.record_checks import (check_builder_shape, check_counts, check_flow, check_order, check_texts,
                                          check_timings, check_verdict)
from tevcore.engine.tree import DraftTree
from tevcore.outputs import write_output

SCHEMA = "tevcore.trace"
SCHEMA_VERSION = 1
STAGES = ("draft", "tree_build", "tree_forward", "flow", "verify_decision", "commit", "record")
# What a round records: "full" (the app, `round`: missing tokens and every text) or "lean" (a benchmark:
# the tree, the flow's a, P, m, X and the verdict, what the loop itself needs).
RECORD_LEVELS = ("full", "lean")
TRACE_TEXT_LIMIT = 1 << 30  # bytes of trace text a reader takes: a small .gz must not expand without bound


@dataclass
class StageTimings:
    """Seconds spent in each stage of one round."""

    draft: float = 0.0
    tree_build: float = 0.0
    tree_forward: float = 0.0
    flow: float = 0.0  # computing the target flow recorded for the round
    verify_decision: float = 0.0
    commit: float = 0.0
    record: float = 0.0  # building the round's record: decoding texts (level "full")

    @property
    def total(self) -> float:
        return sum(getattr(self, stage) for stage in STAGES)


@dataclass
class RoundRecord:
    """Everything one speculative round did, in plain data."""

    index: int
    proposer: str
    builder: str
    budget: int
    temperature: float
    context_length: int  # committed tokens before the round (root included)
    tree: DraftTree
    flow: TargetFlow
    token_texts: list[str]  # decoded text of every node's token (empty at record level "lean")
    missing_texts: list[list[str]]  # decoded text of each node's top missing tokens (empty when lean)
    verifier: str | None = None
    path: list[int] = field(default_factory=list)  # accepted nodes, root first
    exit_node: int | None = None
    bonus_token: int | None = None
    bonus_text: str | None = None
    emitted_tokens: list[int] = field(default_factory=list)  # accepted path tokens + bonus
    emitted_text: str = ""
    timings: StageTimings = field(default_factory=StageTimings)
    drafted_size: int | None = None  # nodes drafted before trimming cut the tree (None: the round was not trimmed)

    @property
    def trimmed(self) -> bool:
        """Whether trimming scored fewer nodes than were drafted."""
        return self.drafted_size is not None and self.drafted_size > self.tree.size

    @property
    def emitted(self) -> int:
        """L, the tokens this round emits: accepted draft tokens plus the bonus, depth(exit) + 1.

        The theory (`../shared/docs/exit-law.md`) calls L the output-block length; the
        package says "emitted" (`mean_emitted` for its mean, shown as E[L]) so
        that "block" names only the block-verification rule. The last round may
        emit fewer (cut at a stop token or at max_new_tokens); `emitted_tokens`
        holds what was really output.
        """
        return len(self.path) if self.path else len(self.emitted_tokens)

    @property
    def expected_length(self) -> float:
        return self.flow.expected_length

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tree"] = self.tree.to_dict()
        data["flow"] = self.flow.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RoundRecord":
        """A record from plain data, checked in full (`record_checks`): a record that loads can be drawn."""
        if not isinstance(data, dict):
            raise ValueError(f"a round record is a JSON object, got {type(data).__name__}")
        data = dict(data)
        tree = data["tree"] = DraftTree.from_dict(data["tree"])
        flow = data["flow"] = TargetFlow.from_dict(data["flow"])
        timings = data.get("timings", {})
        check_timings(timings, STAGES)
        data["timings"] = StageTimings(**timings)
        check_counts(data)
        check_builder_shape(data.get("builder"), data["budget"], tree, data.get("temperature"))
        check_flow(tree, flow)
        check_texts(tree, flow, data.get("token_texts"), data.get("missing_texts"))
        check_verdict(tree, data)
        return cls(**data)


def round_context(prompt_ids: list[int], records: list[RoundRecord], index: int) -> list[int]:
    """The tokens round `index` of a decode started after: the prompt plus every earlier round's emitted tokens."""
    return list(prompt_ids) + [t for r in records[:index] for t in r.emitted_tokens]


def _open(path: Path, mode: str, gz: bool | None = None):
    gz = path.suffix == ".gz" if gz is None else gz
    encoding = "utf-8-sig" if mode == "r" else "utf-8"  # read past a byte-order mark an editor may add
    return gzip.open(path, mode + "t", encoding=encoding) if gz else open(path, mode, encoding=encoding)


def write_trace(path: str | Path, records: Iterable[RoundRecord], meta: dict[str, Any] | None = None,
                overwrite: bool = False) -> Path:
    """Write a header and the records; `.gz` suffix means gzip. Returns where the trace now is.

    Written through `tevcore.outputs.write_output`: a temporary file of this
    writer's own, published atomically; an existing trace is replaced only with
    `overwrite`, else this one goes beside it.
    """
    path = Path(path)

    def write(tmp: Path) -> None:
        with _open(tmp, "w", gz=path.suffix == ".gz") as handle:  # tmp ends in .partial: decide by the target
            handle.write(json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION, "meta": meta or {}}) + "\n")
            for record in records:
                handle.write(json.dumps(record.to_dict()) + "\n")

    return write_output(path, write, overwrite)


@dataclass
class Trace:
    """A trace file's metadata and rounds."""

    meta: dict[str, Any]
    rounds: list[RoundRecord]


def _bounded_lines(path: Path, name: str, max_text_bytes: int) -> list[str]:
    """The file's non-blank lines, refused once their text passes `max_text_bytes` (a gzip bomb stops there)."""
    lines: list[str] = []
    taken = 0
    with _open(path, "r") as handle:
        while line := handle.readline(max_text_bytes - taken + 1):
            taken += len(line.encode("utf-8"))
            if taken > max_text_bytes:
                raise ValueError(f"{name} holds more than {max_text_bytes / 2**20:.0f} MiB of trace text; "
                                 "this reader's limit refuses it")
            if line.strip():
                lines.append(line)
    return lines


def read_trace(path: str | Path, name: str | None = None,
               check_round: Callable[[RoundRecord], None] | None = None,
               max_text_bytes: int = TRACE_TEXT_LIMIT) -> Trace:
    """Read a trace; any corrupt, foreign, wrong-version or over-long file raises a clear ValueError.

    Errors name the file as `name` (default: the path), so a caller reading an
    upload from a temporary file can name the upload instead. `check_round`
    (the rule registry's `verify.trace_checks.check_round`, which the layers
    keep out of this module) checks each round against the rule that
    verified it. At most `max_text_bytes` of (decompressed) text are read, so
    a small compressed upload cannot fill the reader's memory.
    """
    path = Path(path)
    name = name or str(path)
    if not path.is_file():
        raise FileNotFoundError(f"trace file not found: {name}")
    try:
        lines = _bounded_lines(path, name, max_text_bytes)
    except (OSError, UnicodeDecodeError, EOFError) as err:
        raise ValueError(f"{name} is not a readable trace file: {err}") from None
    if not lines:
        raise ValueError(f"{name} is empty: not a trace file")
    try:
        header = json.loads(lines[0])
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"{name} is not a trace file: the first line is not JSON") from None
    if not isinstance(header, dict) or header.get("schema") != SCHEMA:
        raise ValueError(f"{name} is not a tevcore trace file (no '{SCHEMA}' header)")
    if header.get("version") != SCHEMA_VERSION:
        raise ValueError(f"{name} has trace schema version {header.get('version')}; this tevcore reads version {SCHEMA_VERSION}")
    if not isinstance(header.get("meta", {}), dict):
        raise ValueError(f"{name}: the header's meta must be an object")
    rounds: list[RoundRecord] = []
    for number, line in enumerate(lines[1:], start=2):
        where = f"{name}, line {number} (round {number - 2})"
        try:
            data = json.loads(line)
            if isinstance(data, dict) and "schema" in data:
                raise ValueError(f"{where}: a second trace header (two traces joined into one file?)")
            record = RoundRecord.from_dict(data)
            if check_round is not None:
                check_round(record)
            check_order(rounds[-1].index if rounds else None, record.index)
            rounds.append(record)
        except RecursionError:
            raise ValueError(f"{where}: corrupt round record (nested too deeply)") from None
        except ValueError as err:
            if str(err).startswith(where):
                raise
            raise ValueError(f"{where}: corrupt round record ({err})") from None
        except (TypeError, KeyError, RuntimeError, OverflowError) as err:
            raise ValueError(f"{where}: corrupt round record ({err})") from None
    return Trace(meta=header.get("meta", {}), rounds=rounds)
