"""Result files read for the pages: end-to-end benchmark rows and JSONL logs."""

from __future__ import annotations

import io
import json

import pandas as pd


def bench_rows(data: bytes | str) -> pd.DataFrame:
    """Rows of an end-to-end result file: a JSON list of rows, or an object with a 'rows'/'results' list."""
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"not a JSON file: {err}") from None
    if isinstance(obj, dict):
        for key in ("rows", "results", "runs"):
            if isinstance(obj.get(key), list):
                obj = obj[key]
                break
    if not isinstance(obj, list) or not obj or not all(isinstance(r, dict) for r in obj):
        raise ValueError("expected a list of result rows (objects with verifier, budget, speedup, mean_block_length)")
    frame = pd.DataFrame(obj)
    need = [c for c in ("verifier", "budget") if c not in frame]
    if need:
        raise ValueError(f"result rows lack the field(s) {', '.join(need)}")
    if "speedup" not in frame and "mean_block_length" not in frame:
        raise ValueError("result rows need 'speedup' or 'mean_block_length'")
    return frame


def bench_sizes_text(rows: pd.DataFrame, series: pd.Series) -> str | None:
    """The mean tree size of each series at each budget, where the rows record it (`mean_tree_size`): a sampled
    builder's trees often hold fewer nodes than the budget, so a chart by budget must say what it compares."""
    if "mean_tree_size" not in rows or rows["mean_tree_size"].isna().all():
        return None
    sized = rows.assign(series=series)[["series", "budget", "mean_tree_size"]].dropna()
    sized = sized[pd.to_numeric(sized["budget"], errors="coerce") > 0]
    parts = [f"{name}: " + ", ".join(f"{size:.1f} at budget {int(budget)}" for budget, size in
                                     part.groupby("budget")["mean_tree_size"].mean().items())
             for name, part in sized.groupby("series", sort=True)]
    return "; ".join(parts) if parts else None


def read_jsonl_frame(text: str) -> pd.DataFrame:
    """A JSONL log as a frame; unreadable lines (a line being written) are skipped."""
    rows = []
    for line in io.StringIO(text):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return pd.DataFrame(rows)
