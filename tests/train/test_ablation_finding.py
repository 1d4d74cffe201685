from __future__ import annotations

import json
from pathlib import Path

from tevcore.train.ablation_finding import ablation_finding


def row(arm, step, against, t, b, gain, se):
    return {"arm": arm, "step": step, "against": against, "temperature": t, "budget": b, "gain_pct": gain,
            "gain_se_pct": se}


def test_the_finding_counts_only_gains_beyond_two_standard_errors():
    rows = [row("soft-0", 100, "start", 1.0, 8, 5.0, 1.0), row("soft-0", 100, "start", 1.0, 32, 1.5, 1.0),
            row("soft-0", 50, "start", 1.0, 8, 9.0, 1.0),  # an earlier step is not the finding
            row("soft-0.1", 100, "twin", 1.0, 8, -0.1, 0.2), row("soft-0.1", 100, "twin", 1.0, 32, -3.0, 1.0),
            row("soft-0.1", 100, "start", 1.0, 8, 4.0, 1.0),
            row("reference", 0, "start", 1.0, 8, 40.0, 3.0)]
    said = ablation_finding(rows)
    assert said[0].startswith("The reference drafter") and "+40.00% (s.e. 3.00)" in said[0]
    assert "1 gain(s) and 0 loss(es) in 1 cell(s)" in said[0]
    anchor = next(s for s in said if s.startswith("The anchor fine-tune alone (soft-0) at step 100"))
    assert "+1.50% (s.e. 1.00) to +5.00% (s.e. 1.00)" in anchor and "1 gain(s) and 0 loss(es) in 2 cell(s)" in anchor
    tree = next(s for s in said if s.startswith("The tree term"))
    assert "0 gain(s) and 1 loss(es) in 2 cell(s)" in tree
    assert said[-1].startswith("The best cell at step 100: soft-0 at T = 1, budget 8: +5.00%")
    assert ablation_finding([]) == []


def test_the_committed_ablation_reads_as_no_gain():
    """The first ablation (committed drafter as the start): no arm clears the bar against the start."""
    rows = json.loads((Path(__file__).resolve().parents[2] / "assets" / "exit_ablation.json").read_text())["rows"]
    said = ablation_finding(rows)
    assert said and all(" 0 gain(s)" in s for s in said if "gain(s)" in s)
    assert said[-1].endswith("within 2 s.e.")
