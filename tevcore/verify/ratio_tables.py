"""The tables the proposal-ratio rules decide from: acceptance probabilities and residual rows of a sampled tree.

Recursive rejection (rrs) at node v with proposal q and target row p tries
v's draws in draw order with the residual r (r = p at first): draw i is
accepted with min(1, r(x_i) / q_i(x_i)), else r = normalise(max(r - q_i, 0)).
q_i is q for i.i.d. draws and q without the earlier draws, renormalised,
for draws without replacement. Given that the first i - 1 draws at v were
rejected, r and so the acceptance of draw i are fixed numbers: one
(nodes x draws) table of acceptance probabilities decides every round at
once, like the sequential residual rule's, and the residual left after all
of v's draws is the bonus law of an exit at v.

Block verification (Sun et al., ICLR 2025) on a sampled chain x_1..x_g, with
p_i, q_i the target's and the drafter's rows before x_i: w_0 = 1,
w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)); for i < g the residual mass
r_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0) and the stop probability
h_i = r_i / (r_i + 1 - w_i) (0 where both are 0), h_g = w_g. The accepted
length is the last i whose independent Bernoulli(h_i) succeeds (0 if none);
the bonus comes from normalise(max(w_tau p_{tau+1} - q_{tau+1}, 0)), or
p_{g+1} at tau = g.

Both need the very q the tree was drawn from, kept in its `DrawRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tevcore.engine.sampling import probs
from tevcore.engine.tree import DraftTree


@dataclass(frozen=True)
class RatioTables:
    """Per node, its tries in order (child node ids, -1 padded) and their acceptance probabilities;
    per node that can end a round with a residual, the bonus law there (float64 on the CPU)."""

    table: torch.Tensor  # (N+1) x D long
    accept: torch.Tensor  # (N+1) x D float64
    residual: dict[int, torch.Tensor]


def require_draws(tree: DraftTree, rule: str) -> None:
    """A tree with nodes must carry its draws (the root alone, a skipped draft, needs none)."""
    if tree.draws is None and tree.size:
        raise ValueError(f"{rule} divides by the q the tree was drawn from: it needs a sampled tree "
                         "(builder sampled:K1,... or sampled-wor:K1,...), this one is fixed")


def rrs_tables(tree: DraftTree, logits: torch.Tensor, temperature: float) -> RatioTables:
    """Recursive rejection's acceptance table and residuals, with or without replacement as drawn.

    Every node that drew takes its i-th try at once: one (nodes x V) pass per
    try index, so a tree costs as many passes as its most-drawing node has
    draws, not one per draw.
    """
    require_draws(tree, "rrs")
    draws = tree.draws
    n = tree.num_nodes
    if draws is None:
        return RatioTables(torch.full((1, 1), -1, dtype=torch.long), torch.zeros(1, 1, dtype=torch.float64), {})
    per_node = [draws.at(node)[0] for node in range(n)]
    width = max(1, max(len(children) for children in per_node))
    table = torch.tensor([children + [-1] * (width - len(children)) for children in per_node], dtype=torch.long)
    accept = torch.zeros(n, width, dtype=torch.float64)
    drew = [node for node in range(n) if per_node[node]]
    if not drew:
        return RatioTables(table, accept, {})
    rows = torch.tensor(drew)
    r = probs(logits.detach().index_select(0, rows.to(logits.device)).double().cpu(), temperature)
    q = draws.rows[draws.row_of[rows]].double()
    tries = table[rows]
    tokens = tree.tokens[tries.clamp_min(0)]
    removed = torch.zeros_like(q, dtype=torch.bool)
    picked = torch.arange(len(drew))
    for i in range(width):
        valid, token = tries[:, i] >= 0, tokens[:, i]
        q_i = q if draws.mode == "iid" else _normalised_rows(q.masked_fill(removed, 0.0))
        leftover = (r - q_i).clamp_min(0.0)
        mass = leftover.sum(-1)
        ratio = (r[picked, token] / q_i[picked, token]).clamp_max(1.0)
        accept[rows, i] = torch.where(valid, torch.where(mass > 0, ratio, 1.0), 0.0)
        moved = valid & (mass > 0)
        r = torch.where(moved[:, None], leftover / mass.clamp_min(1e-300)[:, None], r)
        removed[picked[valid], token[valid]] = True
    return RatioTables(table, accept, dict(zip(drew, r.unbind(0))))


def _normalised_rows(rows: torch.Tensor) -> torch.Tensor:
    return rows / rows.sum(-1, keepdim=True).clamp_min(1e-300)


def require_chain(tree: DraftTree) -> None:
    """Block verification is exact on a chain each of whose nodes drew its one child once."""
    require_draws(tree, "block")
    if tree.draws is not None and bool(torch.bincount(tree.draws.parents, minlength=tree.num_nodes).gt(1).any()):
        raise ValueError("block verifies a sampled chain (builder sampled:1,1,...): this tree has a node with more "
                         "than one draw")


def block_tables(tree: DraftTree, logits: torch.Tensor, temperature: float) -> RatioTables:
    """Block verification as a one-row table: row 0 holds the stop probabilities h_1..h_g of chain nodes 1..g.

    A round's exit is the last chain node whose Bernoulli(h) succeeds; the
    residual at chain node i (i < g) is the bonus law of that exit.
    """
    require_chain(tree)
    draws = tree.draws
    g = tree.num_nodes - 1
    stop = torch.zeros(1, max(g, 1), dtype=torch.float64)
    table = torch.full((1, max(g, 1)), -1, dtype=torch.long)
    if g == 0:
        return RatioTables(table, stop, {})
    p = probs(logits.detach()[:g].double().cpu(), temperature)  # p_{i+1} is the row of chain node i
    q = draws.rows[draws.row_of[:g]].double()  # q_{i+1}: what chain node i drew its child from
    tokens = tree.tokens[1:]
    ratios = (p[torch.arange(g), tokens] / q[torch.arange(g), tokens]).tolist()
    weights = [1.0]
    for ratio in ratios:
        weights.append(min(1.0, weights[-1] * ratio))
    w = torch.tensor(weights[:g], dtype=torch.float64)
    leftover = (w[:, None] * p[:g] - q).clamp_min(0.0)  # chain node i's residual toward x_{i+1}, i < g
    mass = leftover.sum(-1)
    denominator = mass[1:] + 1.0 - w[1:]
    stop[0, :g - 1] = torch.where(denominator > 0, mass[1:] / denominator.clamp_min(1e-300), 0.0)
    stop[0, g - 1] = weights[g]
    table[0, :g] = torch.arange(1, g + 1)
    return RatioTables(table, stop, dict(enumerate(_normalised_rows(leftover).unbind(0))))
