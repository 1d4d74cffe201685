"""The bench's table on stdout: one line per (set, temperature, method), the figures of each row side by side."""

from __future__ import annotations

from tevcore.engine.records import STAGES
from tevcore.results import Column, format_table as tabulate_rows

_SHORT_STAGE = {"tree_build": "build", "tree_forward": "fwd", "verify_decision": "verify"}


def _gap(row: dict) -> str | None:
    """E[L] - (1 + C) in percent of 1 + C, with its standard error."""
    if row.get("length_gap") is None:
        return None
    scale = 100 / row["mean_expected_length"]
    return f"{row['length_gap'] * scale:+.1f} ({row['length_gap_se'] * scale:.1f})"


def _shares(row: dict) -> str | None:
    return "/".join(f"{100 * v:.0f}" for v in row["stage_shares"].values()) if row.get("stage_shares") else None


def _plain(row: dict) -> str | None:
    return f"{100 * row['skipped_share']:.0f}%" if row.get("skipped_share") is not None else None


def _speedup(row: dict) -> str | None:
    return f"{row['speedup']:.2f}x" if row.get("speedup") is not None else None


COLUMNS = (
    Column("dataset", "dataset"), Column("T", "temperature", "g"), Column("method", "method"),
    Column("B", "budget", "d"), Column("builder", "builder"), Column("verifier", "verifier"), Column("trim", "trim"),
    Column("tok/s", "tokens_per_s", ".1f"), Column("speedup", _speedup, "s"),
    Column("E[L]", "mean_emitted", ".2f"), Column("1+C", "mean_expected_length", ".2f"),
    Column("gap% (se)", _gap, "s"), Column("nodes", "mean_tree_size", ".1f"), Column("plain", _plain, "s"),
    Column(f"% of wall time ({'/'.join(_SHORT_STAGE.get(s, s) for s in (*STAGES, 'other'))})", _shares),
)


def format_table(rows: list[dict]) -> str:
    return tabulate_rows(rows, COLUMNS)
