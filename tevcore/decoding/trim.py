"""Per-round trimming: score only the part of the drafted tree that pays for its forward.

A forward over a tree of k drafted nodes costs c(k) one-token forwards (on a
2-core CPU c(1) ~ 1.1 but c(8) ~ 1.5). The drafter forecasts that the first k
nodes of its tree (heap order: for a best-first tree, the best tree of that
size) yield 1 + s times the sum of their draft path probabilities tokens,
where s (`ForecastCalibration`) is how much target path probability the
scored nodes of this decode's recent rounds actually carried per unit of
draft path probability: a drafter distilled on T = 1 targets is
under-confident at T = 0, where the target's argmax is all that counts.
Each round scores the prefix with the most forecast tokens per cost; k = 0
is a plain one-token step. The costs are the measured curve ('auto', see
`autobudget.trim_costs`) or a flat number X: every non-empty tree costs X,
so the whole tree is kept when its forecast exceeds X and a plain step is
scored otherwise. Trimming only decides which tree is scored; the verifiers
stay exact.
"""

from __future__ import annotations

from typing import Sequence

import torch

class ForecastCalibration:
    """Per decode: target path probability per unit of draft path probability over recently scored nodes.

    Sums decay by `decay` per observed round, so the scale follows the text
    (code, prose); one pseudo-unit of each keeps it at 1 before any evidence.
    """

    def __init__(self, decay: float = 0.9) -> None:
        if not 0 < decay <= 1:
            raise ValueError(f"decay must lie in (0, 1], got {decay}")
        self.decay = decay
        self._target, self._draft = 1.0, 1.0

    @property
    def scale(self) -> float:
        return self._target / self._draft

    def observe(self, draft_path_probs: torch.Tensor, target_path_probs: torch.Tensor) -> None:
        """One scored round: draft and target path probabilities of its non-root nodes."""
        if draft_path_probs.numel() == 0:
            return
        self._target = self.decay * self._target + float(target_path_probs.sum())
        self._draft = self.decay * self._draft + float(draft_path_probs.sum())


def best_prefix_size(path_probs: torch.Tensor, costs: Sequence[float], scale: float = 1.0) -> int:
    """The k maximising (1 + scale * sum of the first k draft path probabilities) / costs[k].

    Ties go to the smaller k.
    """
    forecasts = [1.0] + (1.0 + scale * torch.cumsum(path_probs.double().flatten(), 0)).tolist()
    sizes = range(min(len(forecasts), len(costs)))
    return max(sizes, key=lambda k: (forecasts[k] / costs[k], -k))


def flat_costs(cost: float, budget: int) -> tuple[float, ...]:
    """A plain step costs 1 and every non-empty tree `cost`."""
    return (1.0,) + (float(cost),) * budget


def interpolated_costs(curve: dict[int, float], budget: int) -> tuple[float, ...]:
    """c(k) / c(0) for k = 0..budget, linear between the measured sizes (which must span 0..budget)."""
    sizes = sorted(curve)
    if sizes[0] != 0 or sizes[-1] < budget:
        raise ValueError(f"the cost curve covers sizes {sizes[0]}..{sizes[-1]}, not 0..{budget}")
    costs = []
    for k in range(budget + 1):
        low = max(s for s in sizes if s <= k)
        high = min(s for s in sizes if s >= k)
        share = 0.0 if high == low else (k - low) / (high - low)
        costs.append((curve[low] + share * (curve[high] - curve[low])) / curve[0])
    return tuple(costs)
