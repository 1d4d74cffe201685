"""The bench's table on stdout: one line per (set, temperature, method), the figures of each row side by side."""

from __future__ import annotations

from tevcore.engine.records import STAGES

_SHORT_STAGE = {"tree_build": "build", "tree_forward": "fwd", "verify_decision": "verify"}


def format_table(rows: list[dict]) -> str:
    header = (f"{'dataset':<11}{'T':>4} {'method':<26}{'B':>5} {'builder':<15}{'verifier':<9}{'trim':<5}{'tok/s':>7}{'speedup':>8}"
              f"{'E[L]':>7}{'1+C':>7}{'gap% (se)':>14}{'nodes':>6}{'plain':>6}"
              f"  % of wall time ({'/'.join(_SHORT_STAGE.get(s, s) for s in (*STAGES, 'other'))})")
    lines = [header, "-" * len(header)]
    for r in rows:
        shares = "/".join(f"{100 * v:.0f}" for v in r["stage_shares"].values()) if r["stage_shares"] else ""
        plain = f"{100 * r['skipped_share']:.0f}%" if r.get("skipped_share") is not None else "-"
        lines.append(f"{r['dataset']:<11}{r['temperature']:>4g} {r['method']:<26}{_cell(r['budget'], 5, 'd')} "
                     f"{(r.get('builder') or '-')[:14]:<15}{r['verifier'] or '-':<9}{r.get('trim') or '-':<5}{_cell(r['tokens_per_s'], 7, '.1f')}{_cell(r['speedup'], 7, '.2f')}x"
                     f"{_cell(r['mean_block_length'], 7, '.2f')}{_cell(r['mean_expected_length'], 7, '.2f')}"
                     f"{_gap_cell(r)}"
                     f"{_cell(r.get('mean_tree_size'), 6, '.1f')}{plain:>6}  {shares}")
    return "\n".join(lines)


def _gap_cell(row: dict) -> str:
    """E[L] - (1 + C) in percent of 1 + C, with its standard error."""
    if row.get("length_gap") is None:
        return "-".rjust(14)
    scale = 100 / row["mean_expected_length"]
    return f"{row['length_gap'] * scale:+.1f} ({row['length_gap_se'] * scale:.1f})".rjust(14)


def _cell(value, width: int, spec: str) -> str:
    """A right-aligned table cell; '-' where a method has no such figure."""
    return format(value, f">{width}{spec}") if value is not None else "-".rjust(width)
