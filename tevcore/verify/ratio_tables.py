"""The tables the proposal-ratio rules decide from, computed only where a decision reads them.

Recursive rejection (rrs) at node v with proposal q and target row p tries
v's draws in draw order with the residual r (r = p at first): draw i is
accepted with min(1, r(x_i) / q_i(x_i)), else r = normalise(max(r - q_i, 0)).
q_i is q for i.i.d. draws and q without the earlier draws, renormalised,
for draws without replacement. A mixed tree's fixed child is a draw from a
point mass: q_i is 1 on its token, so it is accepted with r(x) and, when
rejected, leaves r without x (max(r - 1, 0) = 0 there); its drawn siblings
came from q' = q without the fixed token, which is their q_i
(`DrawRecord.proposal_of_try` states every q_i once).

Siblings first: at a node with fixed children rrs tries the DRAWN siblings
first (each against the residual of the full p with its own q_i) and the
fixed children last. q' never proposes a fixed token, so the fixed token
keeps its whole mass through the siblings' residual updates, and trying it
last as a point mass is the same as drawing from the final residual and
moving to the fixed child when that draw lands on its token. Recursive
rejection is exact for any order of proposals whose laws it is told, so
both orders are exact; their acceptance at the node differs: with one fixed
token a and one drawn sibling, point mass first gives
p(a) + sum_x min(p(x), (1 - p(a)) q'(x)), siblings first
p(a) + sum_x min(p(x), q'(x)), the ceiling of that design, never lower
(Hu et al., ICLR 2025, call it greedy-draft verification). `fixed_last`
picks the order: True (rrs's) or False (the earlier point-mass-first order,
kept for comparison by `laws.rrs_fixed_first_law`). Given that the first
i - 1 draws at v were rejected, r and so the acceptance of draw i are fixed
numbers: a (nodes x draws) table of acceptance probabilities decides every verdict,
like the sequential residual rule's, and the residual left after all of
v's draws is the bonus law of an exit at v.

Block verification (Sun et al., ICLR 2025) on a sampled chain x_1..x_g, with
p_i, q_i the target's and the drafter's rows before x_i: w_0 = 1,
w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)); for i < g the residual mass
r_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0) and the stop probability
h_i = r_i / (r_i + 1 - w_i) (0 where both are 0), h_g = w_g. The accepted
length is the last i whose independent Bernoulli(h_i) succeeds (0 if none);
the bonus comes from normalise(max(w_tau p_{tau+1} - q_{tau+1}, 0)), or
p_{g+1} at tau = g.

Why lazily: every entry past a draw's first needs a pass over a float64
row of the whole vocabulary, and one verdict reads few of them. The first
try's acceptance is min(1, a(x_1) / q(x_1)), with a(x_1) the round's flow
edge probability (no row pass); a node's residual advances one try at a
time only when a verdict reaches that try; block's stop probabilities are
read from the chain's end, where the last success is decided; the bonus
row is built at the exit only. The values are the formulas above, term by
term, whichever entries are asked for, so the law is the same as
computing the whole table (which `accept`, `stops` and `residuals` do, for
the laws and for many draws). Where r = q_i the ratio is 1 up to rounding
and rejection leaves r as it is.

Both need the very q the tree was drawn from, kept in its `DrawRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tevcore.engine.sampling import probs
from tevcore.engine.tree import DRAWN_CHAIN, DraftTree


def require_draws(tree: DraftTree, rule: str) -> None:
    """A tree with nodes must carry its draws (the root alone, a skipped draft, needs none)."""
    if tree.draws is None and tree.size:
        raise ValueError(f"{rule} divides by the q the tree was drawn from: it needs a sampled tree "
                         "(builder sampled:K1,... or sampled-wor:K1,..., or a mixed one: mixed:K1,... or "
                         "mixed-wor:K1,...), this one is fixed")


def require_chain(tree: DraftTree) -> None:
    """Block verification is exact on a chain each of whose nodes drew its one child once, from q (a mixed
    chain's fixed children were not drawn: such a tree is no `DRAWN_CHAIN`)."""
    require_draws(tree, "block")
    if DRAWN_CHAIN not in tree.traits:
        raise ValueError("block verifies a sampled chain (builder sampled:1,1,...): this tree has a node with more "
                         "than one draw, or a fixed child that was not drawn from q")


def _tries(tree: DraftTree) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(N+1) x D: each node's drawn child nodes in draw order (-1 padded), q of each draw (0 padded) and
    whether it was fixed."""
    draws, n = tree.draws, tree.num_nodes
    parents = draws.parents if draws is not None else torch.zeros(0, dtype=torch.long)
    counts = torch.bincount(parents, minlength=n)
    width = max(1, int(counts.max()) if parents.numel() else 1)
    table = torch.full((n, width), -1, dtype=torch.long)
    drawn_q = torch.zeros(n, width, dtype=torch.float64)
    fixed = torch.zeros(n, width, dtype=torch.bool)
    if parents.numel():
        order = torch.argsort(parents, stable=True)
        at = parents[order]
        slot = torch.arange(at.numel()) - (counts.cumsum(0) - counts)[at]
        table[at, slot] = draws.children[order]
        drawn_q[at, slot] = draws.q[order]
        fixed[at, slot] = draws.fixed[order]
    return table, drawn_q, fixed


def _fixed_last(table: torch.Tensor, fixed: torch.Tensor) -> torch.Tensor:
    """(N+1) x D: per node, the draw indices in try order with the fixed draws moved after the drawn ones (each
    group keeps its draw order; padding stays last)."""
    key = torch.where(table < 0, 2, fixed.long())  # drawn 0, fixed 1, padding 2
    return torch.sort(key, dim=1, stable=True).indices


def _normalised(row: torch.Tensor) -> torch.Tensor:
    return row / row.sum().clamp_min(1e-300)


@dataclass
class _Residual:
    """One node's recursive-rejection state: r after rejecting its first `step` tries, and q_step."""

    r: torch.Tensor
    proposal: torch.Tensor
    step: int = 0


class RrsTables:
    """Recursive rejection on one sampled or mixed tree: the tries (`table`, (N+1) x D child node ids in draw
    order, -1 padded) and, on demand, their acceptance probabilities and the residuals (float64 on the CPU).

    `edge_prob` is the flow's a(v), float64: p of each node's token in its
    parent's row, which gives every first try's acceptance (divided by the
    first try's proposal of its token: q of the draw over the q mass left
    without the node's fixed tokens, or 1 for a fixed child). `table` is in
    TRY order; `draw_of` says which of the node's draws each try is.
    """

    def __init__(self, tree: DraftTree, logits: torch.Tensor, temperature: float, edge_prob: torch.Tensor,
                 fixed_last: bool = True) -> None:
        require_draws(tree, "rrs")
        self.tree, self.logits, self.temperature = tree, logits.detach(), temperature
        table, drawn_q, fixed = _tries(tree)
        fixed_mass = torch.where(fixed, drawn_q, 0.0).sum(1)
        self.draw_of = _fixed_last(table, fixed) if fixed_last else torch.arange(table.shape[1]).expand_as(table)
        self.table, drawn_q, self.fixed = (t.gather(1, self.draw_of) for t in (table, drawn_q, fixed))
        first = self.table[:, 0]
        first_q = torch.where(self.fixed[:, 0], 1.0, drawn_q[:, 0] / (1.0 - fixed_mass).clamp_min(1e-300))
        ratio = edge_prob.detach().to("cpu", torch.float64)[first.clamp_min(0)] / first_q
        self._accept = torch.full(self.table.shape, float("nan"), dtype=torch.float64)
        self._accept[self.table < 0] = 0.0
        self._accept[:, 0] = torch.where(first >= 0, ratio.clamp_max(1.0), 0.0)
        self._states: dict[int, _Residual] = {}

    @property
    def width(self) -> int:
        return int(self.table.shape[1])

    def accept_column(self, nodes: torch.Tensor, i: int) -> torch.Tensor:
        """Acceptance of try i at each of `nodes` (0 where a node has fewer tries), computing missing entries."""
        column = self._accept[:, i]
        for node in torch.unique(nodes[column[nodes].isnan()]).tolist():
            self._record(node, self._advance(node, i))
        return column[nodes]

    @property
    def accept(self) -> torch.Tensor:
        """The whole (N+1) x D acceptance table."""
        every = torch.arange(self.tree.num_nodes)
        for i in range(1, self.width):
            self.accept_column(every, i)
        return self._accept

    def first_accepted(self, nodes: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        """Per row j, the first try i at nodes[j] with uniforms[j, i] < its acceptance (D if none): the
        entries past a row's first acceptance are never computed."""
        nodes, uniforms = nodes.cpu(), uniforms.cpu()
        first = torch.full((nodes.numel(),), self.width, dtype=torch.long)
        open_ = torch.arange(nodes.numel())
        for i in range(self.width):
            if not open_.numel():
                break
            hit = uniforms[open_, i] < self.accept_column(nodes[open_], i)
            first[open_[hit]] = i
            open_ = open_[~hit]
        return first

    def residual(self, node: int) -> torch.Tensor | None:
        """The bonus law of an exit at `node`: r after all its tries were rejected; None where it drew nothing."""
        tries = int((self.table[node] >= 0).sum())
        return self._advance(node, tries).r if tries else None

    def residuals(self) -> dict[int, torch.Tensor]:
        """Every node's residual (the nodes that drew)."""
        return {node: self.residual(node) for node in range(self.tree.num_nodes) if int(self.table[node, 0]) >= 0}

    def _advance(self, node: int, step: int) -> _Residual:
        """The node's state after rejecting its first `step` tries, moving on from where it is; the
        acceptance of every try it moves past is recorded first, so no entry is left behind."""
        state = self._states.get(node)
        tries = int((self.table[node] >= 0).sum())
        if state is None:
            row = self.logits[node].to("cpu", torch.float64)
            state = self._states[node] = _Residual(probs(row, self.temperature), self.proposal_of(node, 0))
        while state.step < step:
            self._record(node, state)
            leftover = (state.r - state.proposal).clamp_min_(0.0)
            mass = leftover.sum()
            if mass > 0:
                state.r = leftover.div_(mass)
            state.step += 1
            if state.step < tries:
                state.proposal = self.proposal_of(node, state.step)
        return state

    def proposal_of(self, node: int, i: int) -> torch.Tensor:
        """(V,) float64: the law try i at `node` was drawn from (the proposal its acceptance divides by)."""
        return self.tree.draws.proposal_of_try(node, int(self.draw_of[node, i]), self.tree.tokens)

    def proposal_prob(self, node: int, i: int) -> float:
        """That law's probability of the try's own token, from the recorded q alone (1 for a fixed child)."""
        return self.tree.draws.proposal_prob_of_try(node, int(self.draw_of[node, i]))

    def _record(self, node: int, state: _Residual) -> None:
        """min(1, r(x) / q_i(x)) of the try `state` stands at, unless already known (the first try's, from a)."""
        if bool(self._accept[node, state.step].isnan()):
            token = int(self.tree.tokens[int(self.table[node, state.step])])
            self._accept[node, state.step] = min(1.0, float(state.r[token] / state.proposal[token]))


class BlockTables:
    """Block verification on one sampled chain: its stop probabilities h_1..h_g and residuals, on demand
    (float64 on the CPU). `edge_prob` is the flow's a(v): p_i(x_i) of chain node i."""

    def __init__(self, tree: DraftTree, logits: torch.Tensor, temperature: float, edge_prob: torch.Tensor) -> None:
        require_chain(tree)
        self.tree, self.logits, self.temperature = tree, logits.detach(), temperature
        self.length = tree.num_nodes - 1
        _, drawn_q, _ = _tries(tree)
        self.drawn_q = [0.0] + drawn_q[:self.length, 0].tolist()  # q_i(x_i) of chain node i (0 at the root)
        self.ratios = [1.0] + (edge_prob.detach().to("cpu", torch.float64)[1:] / drawn_q[:self.length, 0]).tolist()
        self.weights = [1.0]
        for ratio in self.ratios[1:]:
            self.weights.append(min(1.0, self.weights[-1] * ratio))
        self._stops: dict[int, float] = {}
        self._leftovers: dict[int, torch.Tensor] = {}

    def stop(self, i: int) -> float:
        """h_i, for chain node i in 1..g."""
        if i == self.length:
            return self.weights[i]
        if i not in self._stops:
            mass = float(self._leftover(i).sum())
            denominator = mass + 1.0 - self.weights[i]
            self._stops[i] = mass / denominator if denominator > 0 else 0.0
        return self._stops[i]

    def stops(self) -> torch.Tensor:
        """(g,) float64: h_1..h_g."""
        return torch.tensor([self.stop(i) for i in range(1, self.length + 1)], dtype=torch.float64)

    def last_success(self, uniforms: torch.Tensor) -> torch.Tensor:
        """Per row j, the last chain node i with uniforms[j, i - 1] < h_i (0 if none), read from the chain's end:
        the stop probabilities below a row's last success are never computed."""
        uniforms = uniforms.cpu()
        last = torch.zeros(uniforms.shape[0], dtype=torch.long)
        open_ = torch.arange(uniforms.shape[0])
        for i in range(self.length, 0, -1):
            if not open_.numel():
                break
            hit = uniforms[open_, i - 1] < self.stop(i)
            last[open_[hit]] = i
            open_ = open_[~hit]
        return last

    def residual(self, node: int) -> torch.Tensor | None:
        """The bonus law of an exit at chain node `node`; None at the chain's end (p itself)."""
        return _normalised(self._leftover(node)) if node < self.length else None

    def residuals(self) -> dict[int, torch.Tensor]:
        return {node: self.residual(node) for node in range(self.length)}

    def _leftover(self, i: int) -> torch.Tensor:
        """max(w_i p_{i+1} - q_{i+1}, 0): chain node i's residual toward x_{i+1}, i < g."""
        if i not in self._leftovers:
            row = self.logits[i].to("cpu", torch.float64)
            p = probs(row, self.temperature)
            self._leftovers[i] = p.mul_(self.weights[i]).sub_(self.tree.draws.proposal(i)).clamp_min_(0.0)
        return self._leftovers[i]
