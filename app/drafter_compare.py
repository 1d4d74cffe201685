"""Comparing drafters from the app (no streamlit): what to evaluate, the CLI's paired command, its table.

The numbers come from the engine (`tevcore.train.eval`): `evaluate` for each
drafter's own decode, `paired_coverage` for two drafters at the same round
starts, `prompts_for_se` for how many prompts a standard error needs. This
module only names the jobs and shapes the results.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tevcore.proposers.lookup import SUFFIX as LOOKUP_SUFFIX
from tevcore.train.eval import PairedCell, prompts_for_se
from tevcore.train.eval_cli import paired_argv

# the drafter as trained, and as the explorer's default proposer runs it (drafter + context lookup)
VARIANTS = {"alone": "", "+ lookup": LOOKUP_SUFFIX}


def eval_specs(picks: list[str], variants: list[str]) -> list[tuple[str, str, str]]:
    """(drafter folder, variant, proposer spec) for every picked drafter in every chosen variant, in pick order."""
    return [(path, variant, path + VARIANTS[variant]) for path in picks for variant in variants]


def paired_command(baseline: str, other: str, budgets: list[int], per_set: int, temperature: float,
                   max_new_tokens: int, lookup: bool) -> list[str]:
    """The `eval-drafter --compare` command that measures what the page's paired comparison measures (built by
    the command itself, from its own flags and default sets)."""
    return paired_argv(baseline, other, budgets, per_set, temperature, max_new_tokens, lookup)


def paired_table(cells: list[PairedCell], resolution: float, sets: int) -> pd.DataFrame:
    """One row per budget: both E, B - A with its s.e., and the prompts per set a meaningful s.e. needs.

    `resolution` is the smallest difference worth seeing, as a fraction of E(A); a difference of that size
    stands out at two standard errors when s.e. <= resolution * E(A) / 2. The second count is for the
    measured difference itself (s.e. <= |B - A| / 2). Both scale the measured per-prompt spread
    (`prompts_for_se`) and are split over the `sets` held-out sets.
    """
    def per_set(cell: PairedCell, wanted: float) -> int | None:
        total = prompts_for_se(cell, wanted)
        return None if total is None else -(-total // sets)

    rows = []
    for c in cells:
        rows.append({"budget": c.budget, "prompts": c.prompts, "positions": c.positions,
                     "E(A)": c.baseline_length, "E(B)": c.other_length, "B - A": c.difference,
                     "B - A %": 100 * c.difference / c.baseline_length, "s.e. %": 100 * c.difference_se / c.baseline_length,
                     "prompts per set for s.e. ≤ δ/2": per_set(c, resolution * c.baseline_length / 2),
                     "prompts per set to resolve B - A": per_set(c, abs(c.difference) / 2)})
    return pd.DataFrame(rows)


def missing(picks: list[str]) -> list[str]:
    """Picked drafter folders that are gone (a run keeps only its newest checkpoint)."""
    return [p for p in picks if not Path(p).is_dir()]
