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
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Callable

import torch

from tevcore.config import DecodeConfig, parse_trim
from tevcore.decoding.loop import rounds
from tevcore.outputs import write_json
from tevcore.engine.builders import best_first
from tevcore.timing import seconds_of
from tevcore.proposer_protocol import Proposer
from tevcore.engine.flow import draft_path_probs
from tevcore.target.loading import Target, cache_dir
from tevcore.target.packed_linear import PACKED_FOR_ROWS, is_packed
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree
from tevcore.decoding.trim import best_prefix_size, flat_costs, interpolated_costs

CURVE_SIZES = (0, 1, 2, 4, 8, 16, 32, 64)
AUTO_BUDGETS = (1, 2, 4, 8, 16, 32, 64)  # what `--budget auto` chooses among
SAME_THROUGHPUT = 0.02  # predictions this close to the best count as a tie, which the smallest budget wins


def forward_cost_curve(target: Target, context_length: int = 256, sizes: tuple[int, ...] = CURVE_SIZES,
                       repeats: int = 7, refresh: bool = False) -> dict[int, float]:
    """Seconds of one tree forward per tree size, measured here and cached per machine (see `curve_from_timings`)."""
    threads = torch.get_num_threads()
    context_length = max(1, min(context_length, target.max_context - max(sizes) - 1))  # small-context models
    layout = f"packed{PACKED_FOR_ROWS}" if is_packed(target.model) else "plain"
    capability = torch.backends.cpu.get_cpu_capability() if target.device.type == "cpu" else target.device.type
    key = (f"forward-cost-{target.name}-{target.device.type}-{capability}-{layout}-{threads}t-{context_length}.json"
           .replace(" ", "_"))
    path = cache_dir() / key.replace("/", "_")
    stored = _stored_curve(path)
    if not refresh and all(str(s) in stored for s in sizes):
        return {s: stored[str(s)] for s in sizes}
    session = TargetSession(target)
    session.prefill(random_context(target, context_length))
    measured = sorted(set(sizes) | {int(k) for k in stored})  # one consistent curve over every size kept
    curve = curve_from_timings(tree_forward_times(session, measured, repeats))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {str(k): v for k, v in curve.items()}, overwrite=True)  # a cache: the newest measure wins
    except OSError:  # a cache that cannot be written (see loading.cache_dir) only costs measuring again next time
        pass
    return {s: curve[s] for s in sizes}


def _stored_curve(path: Path) -> dict:
    """A cached curve ({} when missing, damaged or not a curve: it is then measured again)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(stored, dict) or not all(k.isdigit() and isinstance(v, (int, float)) and v > 0
                                               for k, v in stored.items()):
        return {}
    return stored


def random_context(target: Target, length: int, seed: int = 0) -> list[int]:
    """`length` seeded random token ids of the target's vocabulary: a context whose content no cost depends on."""
    return torch.randint(0, target.vocab_size, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def star_tree(root_token: int, size: int) -> DraftTree:
    """The root and `size` children: a tree forward over size + 1 positions (the cost depends on the count)."""
    return DraftTree(tokens=torch.full((size + 1,), root_token).index_put_((torch.arange(1, size + 1),),
                                                                            torch.arange(1, size + 1)),
                     parents=torch.tensor([-1] + [0] * size), draft_logp=torch.zeros(size + 1))


def tree_forward_times(session: TargetSession, sizes: list[int], repeats: int,
                       timer: Callable = seconds_of) -> dict[int, list[float]]:
    """`repeats` timed forwards of a star tree per size, after one untimed pass; the sizes take turns, so a
    machine whose speed drifts shifts them all alike. `timer` is `seconds_of` or another of its signature."""
    trees = {size: star_tree(session.root_token, size) for size in sizes}
    times: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeats + 1):
        for size, tree in trees.items():
            times[size].append(timer(lambda: session.score_tree(tree), session.device)[1])
            session.rollback()
    return {size: found[1:] for size, found in times.items()}  # the first pass warms up


def curve_from_timings(times: dict[int, list[float]]) -> dict[int, float]:
    """One cost per size from repeats that ran the sizes in turn (times[s][r] = size s in repeat r).

    A shared machine drifts and stalls: a median of 7 per size once read 16
    nodes as cheaper than 0 (trimming then kept every 16-node tree), and the
    fastest repeat is no cure, since one-token forwards have fast outliers
    too. Each size is therefore priced relative to the smallest size of the
    same repeat (a slow stretch slows both), as the median of those ratios
    times the smallest size's median; and a bigger tree never costs less, so
    a dip below a smaller size is noise.
    """
    base = min(times)
    base_seconds = median(times[base])
    curve, floor = {}, 0.0
    for size in sorted(times):
        ratio = median(t / b for t, b in zip(times[size], times[base]))
        floor = max(floor, base_seconds * ratio)
        curve[size] = floor
    return curve


def curve_sizes(budgets: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """Tree sizes to measure for these budgets: the standard sizes below the largest, and the budgets."""
    largest = max(budgets, default=0)
    return tuple(sorted({0, *budgets} | {s for s in CURVE_SIZES if s < largest}))


def calibration_rounds(target: Target, proposer: Proposer, prompts: list[list[int]], largest: int,
                       temperature: float, rounds_per_prompt: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per real decoding round, (draft, target) path probability of each node of the budget-`largest` tree.

    Nodes come in heap order, so the first B nodes form the budget-B tree.
    """
    config = DecodeConfig(max_new_tokens=rounds_per_prompt * (proposer.depth + 1), temperature=temperature,
                          budget=largest, seed=0)
    found = []
    for ids in prompts:
        for record in rounds(target, proposer, ids, config):
            if record.index >= rounds_per_prompt:
                break
            found.append((draft_path_probs(record.tree)[1:].float(), record.flow.path_prob[1:].float()))
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
    skipped_share: dict[int, float]  # calibration rounds that trimming turns into plain steps
    kept_nodes: dict[int, float]  # mean tree size scored per round after trimming

    def explain(self) -> str:
        rows = [f"  B={b:>3}: E={self.expected_length[b]:.2f}  forward {1000 * self.forward_seconds[b]:.1f} ms  "
                f"kept {self.kept_nodes[b]:.1f} nodes, plain {100 * self.skipped_share[b]:.0f}%  "
                f"-> {self.predicted_tokens_per_s[b]:.1f} tok/s"
                for b in sorted(self.predicted_tokens_per_s)]
        return (f"auto budget = {self.budget} (draft {1000 * self.draft_seconds:.1f} ms per round)\n" + "\n".join(rows))

    def to_dict(self) -> dict:
        return asdict(self)


def choose_budget(target: Target, proposer: Proposer, prompts: list[list[int]], temperature: float,
                  budgets: tuple[int, ...] = AUTO_BUDGETS, trim: str = "off") -> BudgetChoice:
    """Budget with the highest predicted throughput on this machine for this drafter.

    Within 2% of the best, the smallest budget wins: with trimming, budgets past
    the point where the drafter's trees stop growing in coverage predict the
    same throughput to within the noise of the measured cost curve (its
    repeats here differ by more than that), and a smaller tree costs less to build.

    Predicted throughput = tokens / time summed over calibration rounds, where
    each round scores what trimming (see `trim_costs`) would keep of its tree:
    1 + the target coverage of those nodes, for their measured forward time.
    Trimming's forecast scale is taken over all calibration rounds' whole
    trees (a decode learns it from its own scored rounds).
    """
    curve = forward_cost_curve(target, sizes=curve_sizes(budgets))
    trims = trim_costs(target, list(budgets), trim)
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(prompts[0])
    draft = seconds_of(lambda: [best_first(session.root_token, proposer.propose(session), max(budgets))
                                for _ in range(5)], session.device)[1] / 5
    found = calibration_rounds(target, proposer, prompts, max(budgets), temperature)
    predicted, lengths, skipped, kept = {}, {}, {}, {}
    for b in budgets:
        seconds_by_size = [curve[0] * c for c in interpolated_costs(curve, b)]
        scale = (1.0 + sum(float(p[:b].sum()) for _, p in found)) / (1.0 + sum(float(q[:b].sum()) for q, _ in found))
        tokens = seconds = skips = nodes = 0.0
        for q, p in found:
            k = best_prefix_size(q[:b], trims[b], scale) if trims[b] is not None else min(b, len(q))
            tokens += 1.0 + float(p[:k].sum())
            seconds += draft + seconds_by_size[k]
            skips += k == 0
            nodes += k
        count = max(len(found), 1)
        predicted[b] = tokens / seconds if seconds else 0.0
        lengths[b], skipped[b], kept[b] = tokens / count, skips / count, nodes / count
    predicted[0], lengths[0], skipped[0], kept[0] = 1.0 / curve[0], 1.0, 0.0, 0.0  # budget 0 = plain decoding
    top = max(predicted.values())
    best = min(b for b in predicted if predicted[b] >= top * (1 - SAME_THROUGHPUT))
    return BudgetChoice(best, predicted, lengths, {b: curve[b] for b in predicted}, draft, skipped, kept)


def trim_costs(target: Target, budgets: list[int], spec: str) -> dict[int, tuple[float, ...] | None]:
    """Per-budget `DecodeConfig.tree_costs` for a `--trim` spec (see `tevcore.decoding.trim`).

    'auto' interpolates the forward-cost curve measured on this machine, so a
    round keeps the part of its tree that is forecast to pay for its forward.
    """
    parsed = parse_trim(spec)
    if parsed == "off":
        return dict.fromkeys(budgets)
    if parsed == "auto":
        curve = forward_cost_curve(target, sizes=curve_sizes(budgets))
        return {b: interpolated_costs(curve, b) for b in budgets}
    return {b: flat_costs(parsed, b) for b in budgets}
