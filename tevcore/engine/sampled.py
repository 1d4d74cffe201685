"""Sampled builders: each node's children drawn from the drafter's proposal q (the other school of trees).

`sampled:K1,K2,...` gives the root K1 draws, each depth-1 node K2 draws, and
so on, i.i.d. from the node's q (equal draws share one child node);
`sampled-wor:K1,...` draws without replacement. q is the node's draft row at
the round's temperature (the same `sampling.probs` the target's rows go
through; a lookup mixture is already in the rows). Nodes are expanded
breadth-first and a node draws at most as many times as the budget still has
room for, a count fixed before its draws, so the draws stay exactly q's
law and the tree never exceeds the budget. The draws and the proposal rows go
into the tree's `DrawRecord` for the proposal-ratio verifiers.

`grow_sampled` takes the draw function as an argument: decoding passes the
round's generator (`sampling.draw_proposals`), and the exactness tests pass
one that enumerates every draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.draft_rows import DraftRows
from tevcore.engine.draws import DrawRecord
from tevcore.engine.sampling import probs
from tevcore.engine.tree import DraftTree
from tevcore.parsing import comma_list

SAMPLED_PREFIXES = {"sampled": "iid", "sampled-wor": "wor"}
SAMPLED_BUILDER_NAMES = ("sampled:K1,K2,...", "sampled-wor:K1,K2,...")

# draw(q, k, replace) -> k drawn token ids from the (V,) probability row q
DrawFn = Callable[[torch.Tensor, int, bool], list[int]]


@dataclass(frozen=True)
class SampledShape:
    """Draw mode ('iid' or 'wor') and the number of draws per node at each depth."""

    mode: str
    widths: tuple[int, ...]


def parse_sampled(name: str) -> SampledShape | None:
    """The shape of a 'sampled:...' or 'sampled-wor:...' builder name; None for any other name."""
    prefix, _, spec = name.partition(":")
    if prefix not in SAMPLED_PREFIXES or not _:
        return None
    widths = comma_list(spec, int, f"draw counts like '{prefix}:3,2,1'")
    if any(w < 1 for w in widths):
        raise ValueError(f"{name!r}: every draw count must be a positive integer")
    return SampledShape(SAMPLED_PREFIXES[prefix], tuple(widths))


def grow_sampled(root_token: int, rows: DraftRows, shape: SampledShape, budget: int | None,
                 temperature: float, draw: DrawFn) -> DraftTree:
    """The tree the draws make, breadth-first, with its `DrawRecord` (rows are checked CPU float rows)."""
    if len(shape.widths) > rows.depth:
        raise ValueError(f"{len(shape.widths)} draw depths but the drafter only gives {rows.depth} depths")
    tokens, parents, logq, depths, firsts = [root_token], [-1], [0.0], [0], [None]
    proposals: list[torch.Tensor] = []
    row_index: dict[tuple[int, int | None], int] = {}
    row_of = [-1]
    drawn_at: list[int] = []
    drawn_child: list[int] = []
    drawn_q: list[float] = []
    room = math.inf if budget is None else int(budget)
    node = 0
    while node < len(tokens) and depths[node] < len(shape.widths) and len(tokens) - 1 < room:
        depth, first = depths[node] + 1, firsts[node]
        key = (depth, first if depth > 1 and first in rows.after_first else None)
        if key not in row_index:
            row_index[key] = len(proposals)
            proposals.append(probs(rows.row(depth, first).double(), temperature))
        row_of[node] = row_index[key]
        q = proposals[row_index[key]]
        count = int(min(shape.widths[depth - 1], room - (len(tokens) - 1)))
        child_of: dict[int, int] = {}
        for token in draw(q, count, shape.mode == "iid"):
            if token not in child_of:
                child_of[token] = len(tokens)
                tokens.append(int(token))
                parents.append(node)
                logq.append(math.log(float(q[token])))
                depths.append(depth)
                firsts.append(token if depth == 1 else first)
                row_of.append(-1)
            drawn_at.append(node)
            drawn_child.append(child_of[token])
            drawn_q.append(float(q[token]))
        node += 1
    stacked = torch.stack(proposals) if proposals else torch.zeros(0, rows.vocab_size, dtype=torch.float64)
    draws = DrawRecord(shape.mode, torch.tensor(drawn_at, dtype=torch.long),
                       torch.tensor(drawn_child, dtype=torch.long), torch.tensor(drawn_q, dtype=torch.float64),
                       rows=stacked, row_of=torch.tensor(row_of, dtype=torch.long))
    return DraftTree(tokens=torch.tensor(tokens, dtype=torch.long), parents=torch.tensor(parents, dtype=torch.long),
                     draft_logp=torch.tensor(logq, dtype=torch.float32), budget=budget, draws=draws)
