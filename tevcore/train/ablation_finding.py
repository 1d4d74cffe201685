"""What an ExitTrain ablation found, in words computed from its rows (scripts/exit_train_ablation_report.py).

The report and the app's Ablation tab say the same sentences, read off the paired gains: how far the reference
drafter sits from the start (when the pass scored one), what the lambda-0 arms (the anchor fine-tune alone) gain
over the start, and what the tree term adds over its lambda-0 twin, at the last evaluated step. A gain counts as
found only beyond two standard errors (clustered by prompt); the sentences say how many cells clear that bar.
"""

from __future__ import annotations

from collections.abc import Sequence

BAR_SE = 2.0  # a paired gain counts when it lies beyond this many standard errors


def _beyond(row: dict) -> int:
    """+1 for a gain beyond the bar, -1 for a loss beyond it, 0 within."""
    if abs(row["gain_pct"]) <= BAR_SE * row["gain_se_pct"]:
        return 0
    return 1 if row["gain_pct"] > 0 else -1


def _span(rows: Sequence[dict]) -> str:
    """The range of the rows' gains, each end with its s.e."""
    low, high = min(rows, key=lambda r: r["gain_pct"]), max(rows, key=lambda r: r["gain_pct"])
    if low is high:
        return f"{low['gain_pct']:+.2f}% (s.e. {low['gain_se_pct']:.2f})"
    return f"{low['gain_pct']:+.2f}% (s.e. {low['gain_se_pct']:.2f}) to {high['gain_pct']:+.2f}% (s.e. {high['gain_se_pct']:.2f})"


def _count(rows: Sequence[dict]) -> str:
    ups, downs = sum(_beyond(r) > 0 for r in rows), sum(_beyond(r) < 0 for r in rows)
    return f"beyond {BAR_SE:g} s.e.: {ups} gain(s) and {downs} loss(es) in {len(rows)} cell(s)"


def _by_temperature(rows: Sequence[dict]) -> str:
    return "; ".join(f"T = {t:g}: {_span([r for r in rows if r['temperature'] == t])}"
                     for t in sorted({r["temperature"] for r in rows}))


def ablation_finding(rows: Sequence[dict]) -> list[str]:
    """The finding as sentences (an empty list when no checkpoint was evaluated)."""
    arms = [r for r in rows if r["arm"] != "reference"]
    if not arms:
        return []
    step = max(r["step"] for r in arms)
    last = [r for r in arms if r["step"] == step]
    said = []
    reference = [r for r in rows if r["arm"] == "reference"]
    if reference:
        said.append(f"The reference drafter against the start, over budgets {_budgets(reference)}: "
                    f"{_by_temperature(reference)} ({_count(reference)}).")
    anchor_only = [r for r in last if r["against"] == "start" and r["arm"].endswith("-0")]
    for arm in sorted({r["arm"] for r in anchor_only}):
        part = [r for r in anchor_only if r["arm"] == arm]
        said.append(f"The anchor fine-tune alone ({arm}) at step {step} against the start: {_by_temperature(part)} "
                    f"({_count(part)}).")
    twins = [r for r in last if r["against"] == "twin"]
    if twins:
        said.append(f"The tree term (each lambda > 0 arm against its lambda-0 twin) at step {step}: "
                    f"{_by_temperature(twins)} ({_count(twins)}).")
    best = max((r for r in last if r["against"] == "start"), key=lambda r: r["gain_pct"], default=None)
    if best is not None:
        said.append(f"The best cell at step {step}: {best['arm']} at T = {best['temperature']:g}, budget "
                    f"{best['budget']}: {best['gain_pct']:+.2f}% (s.e. {best['gain_se_pct']:.2f}) over the start"
                    f"{'.' if _beyond(best) > 0 else ', within ' + format(BAR_SE, 'g') + ' s.e.'}")
    return said


def _budgets(rows: Sequence[dict]) -> str:
    return ", ".join(str(b) for b in sorted({r["budget"] for r in rows}, key=lambda b: (b == "chain", 0 if b == "chain" else b)))
