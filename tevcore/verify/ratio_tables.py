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


def _normalised(row: torch.Tensor) -> torch.Tensor:
    total = row.sum()
    return row / total if total > 0 else row


def rrs_tables(tree: DraftTree, logits: torch.Tensor, temperature: float) -> RatioTables:
    """Recursive rejection's acceptance table and residuals, with or without replacement as drawn."""
    require_draws(tree, "rrs")
    draws = tree.draws
    n = tree.num_nodes
    if draws is None:
        return RatioTables(torch.full((1, 1), -1, dtype=torch.long), torch.zeros(1, 1, dtype=torch.float64), {})
    replace = draws.mode == "iid"
    per_node = [draws.at(node) for node in range(n)]
    width = max(1, max(len(children) for children, _ in per_node))
    table = torch.full((n, width), -1, dtype=torch.long)
    accept = torch.zeros(n, width, dtype=torch.float64)
    residual: dict[int, torch.Tensor] = {}
    tokens = tree.tokens.tolist()
    for node, (children, _) in enumerate(per_node):
        if not children:
            continue
        q = draws.proposal(node)
        r = probs(logits[node].detach().double().cpu(), temperature)
        removed = torch.zeros_like(q, dtype=torch.bool)
        for i, child in enumerate(children):
            token = tokens[child]
            q_i = q if replace else _normalised(q.masked_fill(removed, 0.0))
            table[node, i] = child
            leftover = (r - q_i).clamp_min(0.0)
            accept[node, i] = 1.0 if leftover.sum() <= 0 else min(1.0, float(r[token] / q_i[token]))
            r = _normalised(leftover) if leftover.sum() > 0 else r
            removed[token] = True
        residual[node] = r
    return RatioTables(table, accept, residual)


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
    residual: dict[int, torch.Tensor] = {}
    if g == 0:
        return RatioTables(table, stop, residual)
    rows = probs(logits.detach().double().cpu(), temperature)  # p_{i+1} is the row of chain node i
    q = [draws.proposal(i) for i in range(g)]  # q_{i+1}: what chain node i drew its child from
    tokens = tree.tokens.tolist()
    w = 1.0
    for i in range(g + 1):  # chain node i: weight w_i, then its residual toward x_{i+1}
        if i:
            w = min(1.0, w * float(rows[i - 1, tokens[i]] / q[i - 1][tokens[i]]))
        if i == g:
            stop[0, g - 1] = w
            break
        leftover = (w * rows[i] - q[i]).clamp_min(0.0)
        mass = float(leftover.sum())
        if i:
            denominator = mass + 1.0 - w
            stop[0, i - 1] = mass / denominator if denominator > 0 else 0.0
        residual[i] = _normalised(leftover)
    table[0, :g] = torch.arange(1, g + 1)
    return RatioTables(table, stop, residual)
