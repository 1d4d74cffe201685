"""`--budget auto`: pick the node budget that maximises predicted tokens per second.

Predicted throughput(B) = E(B) / (draft time + tree forward time(B) + other
per-round time), where the forward-cost curve is measured on this machine
(and cached) and E(B) = 1 + coverage of the drafter's best-first tree cut to
B nodes. Best-first trees are nested (the B-node tree is the first B nodes of
any larger one, in heap order) and P(v) depends only on v's path, so one tree
forward at the largest budget gives E(B) for every smaller budget.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from statistics import median

import torch

from .builders import best_first
from .drafters.base import Proposer
from .models import Target, cache_dir
from .packed_linear import PACKED_FOR_ROWS, is_packed
from .target import TargetSession
from .tree import DraftTree

CURVE_SIZES = (0, 1, 2, 4, 8, 16, 32, 64)


def forward_cost_curve(target: Target, context_length: int = 256, sizes: tuple[int, ...] = CURVE_SIZES,
                       repeats: int = 5, refresh: bool = False) -> dict[int, float]:
    """Median seconds of one tree forward per tree size, measured here and cached per machine."""
    threads = torch.get_num_threads()
    context_length = max(1, min(context_length, target.max_context - max(sizes) - 1))  # small-context models
    layout = f"packed{PACKED_FOR_ROWS}" if is_packed(target.model) else "plain"
    key = f"forward-cost-{target.name}-{target.device.type}-{layout}-{threads}t-{context_length}.json".replace(" ", "_")
    path = cache_dir() / key.replace("/", "_")
    if path.is_file() and not refresh:
        stored = json.loads(path.read_text())
        if all(str(s) in stored for s in sizes):
            return {s: stored[str(s)] for s in sizes}
    session = TargetSession(target)
    session.prefill(torch.randint(0, target.vocab_size, (context_length,), generator=torch.Generator().manual_seed(0)).tolist())
    curve = {}
    for size in sizes:
        tree = DraftTree(tokens=torch.full((size + 1,), session.root_token).index_put_(
                             (torch.arange(1, size + 1),), torch.arange(1, size + 1)),
                         parents=torch.tensor([-1] + [0] * size), draft_logp=torch.zeros(size + 1))
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            session.score_tree(tree)
            times.append(time.perf_counter() - start)
            session.rollback()
        curve[size] = median(times[1:])  # the first call warms up
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({str(k): v for k, v in curve.items()}))
    return curve


def calibration_rounds(target: Target, proposer: Proposer, prompts: list[list[int]], largest: int,
                       temperature: float, rounds_per_prompt: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per real decoding round, (draft, target) path probability of each node of the budget-`largest` tree.

    Nodes come in heap order, so the first B nodes form the budget-B tree.
    """
    from .config import DecodeConfig
    from .decode import rounds

    config = DecodeConfig(max_new_tokens=rounds_per_prompt * (proposer.depth + 1), temperature=temperature,
                          budget=largest, seed=0)
    found = []
    for ids in prompts:
        for record in rounds(target, proposer, ids, config):
            if record.index >= rounds_per_prompt:
                break
            found.append((record.tree.draft_path_probs()[1:].float(), record.flow.path_prob[1:].float()))
    return found


def expected_length_by_budget(target: Target, proposer: Proposer, prompts: list[list[int]],
                              budgets: tuple[int, ...], temperature: float, rounds_per_prompt: int = 8) -> dict[int, float]:
    """Mean 1 + C of the drafter's trees cut to each budget, over real decoding contexts."""
    found = calibration_rounds(target, proposer, prompts, max(budgets), temperature, rounds_per_prompt)
    return {b: sum(1.0 + float(p[:b].sum()) for _, p in found) / max(len(found), 1) for b in budgets}


@dataclass
class BudgetChoice:
    """The chosen budget and the figures behind the choice."""

    budget: int
    predicted_tokens_per_s: dict[int, float]
    expected_length: dict[int, float]
    forward_seconds: dict[int, float]
    draft_seconds: float
    skipped_share: dict[int, float]  # calibration rounds the skip rule would turn into plain steps

    def explain(self) -> str:
        rows = [f"  B={b:>3}: E={self.expected_length[b]:.2f}  forward {1000 * self.forward_seconds[b]:.1f} ms  "
                f"skipped {100 * self.skipped_share[b]:.0f}%  -> {self.predicted_tokens_per_s[b]:.1f} tok/s"
                for b in sorted(self.predicted_tokens_per_s)]
        return (f"auto budget = {self.budget} (draft {1000 * self.draft_seconds:.1f} ms per round)\n" + "\n".join(rows))

    def to_dict(self) -> dict:
        return asdict(self)


def choose_budget(target: Target, proposer: Proposer, prompts: list[list[int]], temperature: float,
                  budgets: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64), skip_below: str = "0") -> BudgetChoice:
    """Budget with the highest predicted throughput on this machine for this drafter.

    Predicted throughput = tokens / time summed over calibration rounds, where a
    round whose draft forecast falls below the budget's `skip_below` threshold
    (see `skip_thresholds`) counts as a plain step: one token for c(0).
    """
    curve = forward_cost_curve(target, sizes=tuple(sorted(set(budgets) | {0})))
    thresholds = skip_thresholds(target, list(budgets), skip_below)
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(prompts[0])
    start = time.perf_counter()
    for _ in range(5):
        best_first(session.root_token, proposer.propose(session), max(budgets))
    draft = (time.perf_counter() - start) / 5
    found = calibration_rounds(target, proposer, prompts, max(budgets), temperature)
    predicted, lengths, skipped = {}, {}, {}
    for b in budgets:
        tokens = seconds = skips = 0.0
        for q, p in found:
            keep = thresholds[b] <= 0 or 1.0 + float(q[:b].sum()) >= thresholds[b]
            tokens += 1.0 + float(p[:b].sum()) if keep else 1.0
            seconds += draft + (curve[b] if keep else curve[0])
            skips += 0.0 if keep else 1.0
        count = max(len(found), 1)
        predicted[b], lengths[b], skipped[b] = tokens / seconds if seconds else 0.0, tokens / count, skips / count
    predicted[0], lengths[0], skipped[0] = 1.0 / curve[0], 1.0, 0.0  # budget 0 = plain autoregressive decoding
    best = max(predicted, key=lambda b: (predicted[b], -b))
    return BudgetChoice(best, predicted, lengths, {b: curve[b] for b in predicted}, draft, skipped)


def parse_skip_below(text: str) -> float:
    """A `--skip-below` number (the 'auto' form needs a target: see `skip_thresholds`)."""
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"skip_below must be a number or 'auto', got {text!r}") from None


def skip_thresholds(target: Target, budgets: list[int], spec: str) -> dict[int, float]:
    """Per-budget `skip_below`: a number as given, or 'auto' = the measured forward-cost ratio c(B) / c(0).

    At 'auto' a round keeps its tree only when the drafter forecasts more
    tokens from it than the tree's forward costs in single-token forwards.
    """
    if spec == "auto":
        curve = forward_cost_curve(target, sizes=tuple(sorted(set(budgets) | {0})))
        return {b: curve[b] / curve[0] for b in budgets}
    return dict.fromkeys(budgets, parse_skip_below(spec))
