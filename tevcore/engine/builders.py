"""Builders: per-depth draft log-probabilities (K x V, or `DraftRows`) -> a `DraftTree`.

A block drafter gives one distribution per depth (below a depth-1 token it
was given, rows that know that token), so a prefix's draft score is the sum
of its rows' log-probabilities. The best-first builder returns the top-B
prefixes by that score (DDTree). The sampled builders (`sampled.py`) draw
each node's children from the rows instead, and the mixed ones fix each
node's top-1 child and draw its siblings. This module holds the functions
that grow the trees; which builders exist and how a name is parsed into one
is `builder_specs.py`, which imports these (never the reverse).
"""

from __future__ import annotations

import heapq
import math
import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.draft_rows import DraftRows, as_draft_rows
from tevcore.engine.sampled import SampledShape, all_fixed, depth_rows, grow_sampled
from tevcore.engine.sampling import draw_proposals
from tevcore.engine.tree import DraftTree

Rows = torch.Tensor | DraftRows


def _check_rows(depth_logq: Rows) -> DraftRows:
    return as_draft_rows(depth_logq).to_cpu_float()


def _first_token(node: int, grown: PartialTree) -> int | None:
    """The depth-1 token on a node's path (None at the root)."""
    while grown.depths[node] > 1:
        node = grown.parents[node]
    return grown.tokens[node] if grown.depths[node] == 1 else None


def check_budget(budget: int) -> int:
    if isinstance(budget, bool) or int(budget) != budget or budget < 0:
        raise ValueError(f"budget must be a non-negative integer, got {budget!r}")
    return int(budget)


@dataclass(frozen=True)
class PartialTree:
    """The tree a best-first growth has built so far (node 0 is the root)."""

    tokens: list[int]
    parents: list[int]
    scores: list[float]  # prefix log-score of each node, 0 at the root
    depths: list[int]


# children(node, tree so far) -> (log-scores, tokens) of the node's candidate children, best first
RankedChildren = Callable[[int, PartialTree], tuple[list[float], list[int]]]


def grow_best_first(root_token: int, budget: int, children: RankedChildren) -> PartialTree:
    """Top-`budget` prefixes by summed log-score, grown with a heap (DDTree).

    A popped prefix pushes its next sibling and its first child; both score no
    higher than it, so pops come out in descending score order and the result
    is prefix-closed. Ties break by push order, which makes the tree
    deterministic. A node's children are asked for once, when it joins a tree
    that still has room; a prefix of score -inf (probability zero) is never
    added, so the tree can stay smaller than the budget.
    """
    grown = PartialTree(tokens=[root_token], parents=[-1], scores=[0.0], depths=[0])
    options: dict[int, tuple[list[float], list[int]]] = {}
    heap: list[tuple[float, int, int, int]] = []  # (-prefix score, push order, parent node, rank among its children)
    pushes = 0

    def push(parent: int, rank: int) -> None:
        nonlocal pushes
        pushes += 1
        heapq.heappush(heap, (-(grown.scores[parent] + options[parent][0][rank]), pushes, parent, rank))

    def offer_children(node: int) -> None:
        options[node] = children(node, grown)
        if options[node][0]:
            push(node, 0)

    if budget:
        offer_children(0)
    while heap and len(grown.tokens) - 1 < budget:
        neg_score, _, parent, rank = heapq.heappop(heap)
        if neg_score == math.inf:
            break
        values, ids = options[parent]
        grown.tokens.append(ids[rank])
        grown.parents.append(parent)
        grown.scores.append(-neg_score)
        grown.depths.append(grown.depths[parent] + 1)
        if rank + 1 < len(values):
            push(parent, rank + 1)
        if len(grown.tokens) - 1 < budget:
            offer_children(len(grown.tokens) - 1)
    return grown


def best_first(root_token: int, depth_logq: Rows, budget: int) -> DraftTree:
    """Top-`budget` prefixes by draft score, the sum of per-depth log-probabilities (DDTree)."""
    rows = _check_rows(depth_logq)
    budget = check_budget(budget)
    width = min(budget, rows.vocab_size)
    ranked: dict[tuple[int, int | None], tuple[list[float], list[int]]] = {}

    def children(node: int, grown: PartialTree) -> tuple[list[float], list[int]]:
        depth = grown.depths[node] + 1
        if depth > rows.depth:
            return [], []
        first = _first_token(node, grown)
        key = (depth, first if first in rows.after_first else None)
        if key not in ranked:
            top_logq, top_tokens = rows.row(depth, first).topk(width)
            ranked[key] = (top_logq.tolist(), top_tokens.tolist())
        return ranked[key]

    grown = grow_best_first(root_token, budget, children)
    return tree_from_prefix_scores(grown.tokens, grown.parents, grown.scores, budget)


def chain(root_token: int, depth_logq: Rows, budget: int | None = None) -> DraftTree:
    """The top-1 path, as deep as the drafter's rows (or the budget) allow."""
    rows = _check_rows(depth_logq)
    depth = rows.depth if budget is None else min(rows.depth, check_budget(budget))
    tokens, scores, first = [root_token], [0.0], None
    for d in range(1, depth + 1):
        best_logq, best_token = rows.row(d, first).max(dim=-1)
        tokens.append(int(best_token))
        scores.append(scores[-1] + float(best_logq))
        first = tokens[1]
    parents = list(range(-1, depth))
    return tree_from_prefix_scores(tokens, parents, scores, budget)


def fixed_width(root_token: int, depth_logq: Rows, widths: list[int], budget: int | None = None) -> DraftTree:
    """Top-k per depth: every node at depth d-1 gets the top widths[d-1] tokens of its depth-d row."""
    rows = _check_rows(depth_logq)
    if not widths or any(int(w) < 1 for w in widths):
        raise ValueError(f"widths must be a non-empty list of positive integers, got {widths!r}")
    if len(widths) > rows.depth:
        raise ValueError(f"{len(widths)} widths but the drafter only gives {rows.depth} depths")
    tokens, parents, scores, firsts = [root_token], [-1], [0.0], [None]
    frontier = [0]
    for depth, width in enumerate(widths, start=1):
        next_frontier = []
        for parent in frontier:
            top_logq, top_tokens = rows.row(depth, firsts[parent]).topk(min(int(width), rows.vocab_size))
            for lq, tok in zip(top_logq.tolist(), top_tokens.tolist()):
                next_frontier.append(len(tokens))
                tokens.append(tok)
                parents.append(parent)
                scores.append(scores[parent] + lq)
                firsts.append(tok if depth == 1 else firsts[parent])
        frontier = next_frontier
    check_width_budget(widths, budget)
    return tree_from_prefix_scores(tokens, parents, scores, budget)


def check_width_budget(widths: list[int], budget: int | None) -> None:
    """Refuse widths whose full tree holds more nodes than the budget."""
    size, level = 0, 1
    for width in widths:
        level *= int(width)
        size += level
    if budget is not None and size > check_budget(budget):
        raise ValueError(f"widths {widths} give {size} nodes, more than the budget {budget}")


def tree_from_prefix_scores(tokens: list[int], parents: list[int], prefix_scores: list[float], budget: int | None) -> DraftTree:
    """Per-node draft log-prob = prefix score minus the parent's prefix score."""
    node_logq = [0.0] + [prefix_scores[i] - prefix_scores[parents[i]] for i in range(1, len(tokens))]
    return DraftTree(
        tokens=torch.tensor(tokens, dtype=torch.long),
        parents=torch.tensor(parents, dtype=torch.long),
        draft_logp=torch.tensor(node_logq, dtype=torch.float32),
        budget=budget,
    )


# (root token, rows, budget, temperature, generator) -> the round's tree: what a family makes from its counts
Build = Callable[[int, Rows, "int | None", float, "torch.Generator | None"], DraftTree]


def sampled_build(mode: str, fixes_top1: bool = False,
                  policy: bool = False) -> Callable[..., Build]:
    """Counts (and the spec's options) -> a builder that draws each node's children from the rows ('iid' or
    'wor'; top-1 fixed if mixed; per node all fixed or mixed if a `policy`, which at T = 0 builds the best-first
    tree with every child fixed)."""
    def make(counts: tuple[int, ...], qt: float | None = None, sharp: float | None = None,
             sib: float | None = None) -> Build:
        shape = sampled_shape(mode, counts, fixes_top1, qt, sharp if policy else None, sib)

        def build(root: int, logq: Rows, budget: int | None, temperature: float,
                  generator: torch.Generator | None) -> DraftTree:
            if generator is None:
                raise ValueError("a sampled builder draws with the round's generator; none was given")
            rows = _check_rows(logq)
            if shape.sharp is not None and temperature == 0:
                # with no budget, as many nodes as the shape holds when every node has its K_d children
                fixed = best_first(root, rows, budget if budget is not None else
                                   sum(math.prod(counts[:d]) for d in range(1, len(counts) + 1)))
                return all_fixed(fixed, depth_rows(rows, dataclasses.replace(shape, widths=(1,) * rows.depth)),
                                 shape.proposal_temperature or 1.0)
            draw = lambda q, k, replace: draw_proposals(q, k, replace, generator)  # noqa: E731
            return grow_sampled(root, depth_rows(rows, shape),
                                shape, None if budget is None else check_budget(budget), temperature, draw)

        return build

    return make


POLICY_SHARP = 0.5  # a policy node whose draft top-1 holds at least this keeps its children all fixed


def sampled_shape(mode: str, counts: tuple[int, ...], fixes_top1: bool, qt: float | None = None,
                  sharp: float | None = None, sib: float | None = None) -> SampledShape:
    """The shape a sampled spec draws with: a policy (`sharp` given) fixes each node's top-1 at least; `sib`
    (1) drafts each node off the drafter's top-1 path from rows given its own path."""
    return SampledShape(mode, tuple(counts), fixes_top1 or sharp is not None, qt, sharp, bool(sib))
