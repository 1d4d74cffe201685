"""What the Monte Carlo tests of sampled trees share: the foil tree and the verdict on p-values over seeds.

The foil is a fixed tree (nothing drawn) that claims each node drew its
children from its q row: a proposal-ratio rule on it is not exact, and a
test that cannot tell it from a real sampled tree at the same sample size
has no power. Each seed's chi-square p-value is uniform under the null, so
the seeds pass together when none is tiny and their spread is uniform (KS).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from scipy import stats

from tevcore.engine.draws import DrawRecord
from tevcore.engine.tree import DraftTree

MIN_PVALUE = 1e-4  # no single seed this far out
MIN_KS_PVALUE = 1e-3  # the seeds' p-values look uniform
FOIL_PVALUE = 1e-6  # every foil seed at least this far out


def claimed_draws(tree: DraftTree, q_row: Callable[[int], torch.Tensor]) -> DraftTree:
    """`tree` claiming each node drew its children once each, in index order, without replacement, from
    `q_row(node)` (a (V,) probability row)."""
    rows, row_of, parents, children, q = [], [-1] * tree.num_nodes, [], [], []
    for node, kids in enumerate(tree.children()):
        if kids:
            row = q_row(node).double().cpu()
            row_of[node] = len(rows)
            rows.append(row)
            for kid in kids:
                parents.append(node), children.append(kid), q.append(float(row[int(tree.tokens[kid])]))
    draws = DrawRecord("wor", torch.tensor(parents, dtype=torch.long), torch.tensor(children, dtype=torch.long),
                       torch.tensor(q, dtype=torch.float64), rows=torch.stack(rows), row_of=torch.tensor(row_of))
    return DraftTree(tokens=tree.tokens, parents=tree.parents, draft_logp=tree.draft_logp, draws=draws)


def seeds_follow_the_law(pvalues: list[float]) -> tuple[bool, float]:
    """Whether the p-values of independent seeds are consistent with the null, and their KS p-value."""
    ks = float(stats.kstest(pvalues, "uniform").pvalue)
    return min(pvalues) > MIN_PVALUE and ks > MIN_KS_PVALUE, ks
