"""Result files read for the pages: the measuring commands' result records and JSONL logs."""

from __future__ import annotations

import io
import json

import pandas as pd

from tevcore.results import ResultRecord, read_result


def result_file(data: bytes | str, name: str) -> ResultRecord:
    """The result record of a file a measuring command wrote (bench, bench-verifiers, rounds-at-context,
    eval-drafter, compare, a GPU-proof step); a ValueError says why a file is not one."""
    return read_result(data.encode() if isinstance(data, str) else data, name)


def runs_frame(records: dict[str, ResultRecord]) -> pd.DataFrame:
    """One line per file: which command wrote it, when, from which code, where, with which seed."""
    return pd.DataFrame([{"file": name, "command": r.command, "rows": len(r.rows), "started": r.meta.started,
                          "commit": r.meta.commit[:12], "device": r.meta.device, "threads": r.meta.torch_threads,
                          "seed": r.meta.seed, "partial": r.partial or "", "command line": r.meta.command_line}
                         for name, r in records.items()])


def bench_rows(records: dict[str, ResultRecord]) -> pd.DataFrame:
    """The rows that draw the end-to-end figures: a verifier at a budget with a speedup or a mean block length
    (bench's speculative rows; bench-verifiers and eval rows measure other things), with their file."""
    frames = [pd.DataFrame(r.rows).assign(file=name) for name, r in records.items() if r.rows]
    if not frames:
        return pd.DataFrame()
    rows = pd.concat(frames, ignore_index=True)
    if not {"verifier", "budget"} <= set(rows) or not {"speedup", "mean_emitted"} & set(rows):
        return pd.DataFrame()
    keep = rows["verifier"].notna() & rows["budget"].notna()
    figures = [c for c in ("speedup", "mean_emitted") if c in rows]
    return rows[keep & rows[figures].notna().any(axis=1)].reset_index(drop=True)


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
