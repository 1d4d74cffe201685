"""Many verifications of one scored tree at once, and the analytic law they must follow.

`simulate` runs n independent verifications of the same tree, vectorised over
the n draws: each verifier walks the tree by its own rule (TEV: one
categorical over X; predraw: per node, which child the target draw hits or
none; residual and the foil: accept-or-reject per child in order), with the
per-node outcome of a target draw collapsed to "which child, or none". Given
the exit e, every rule draws its bonus from p(.|e) without e's children, so
bonuses are drawn per exit node in one multinomial call each, not V-wide per
draw. `exit_law` is the law an exact verifier must match: X from
`flow.target_flow` and that masked bonus row.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.flow import TargetFlow, parent_edge_log_probs, target_flow
from tevcore.engine.sampling import make_generator, masked_probs, sample_index
from tevcore.engine.tree import DraftTree
from tevcore.verify.verifiers import (check_inputs, chain_subtree, child_token_row, get_verifier, tev_exit_mass,
                        verify_greedy)

BonusCounts = dict[int, tuple[torch.Tensor, torch.Tensor]]  # exit node -> (token ids, counts)


@dataclass(frozen=True)
class SimulationResult:
    """Counts from n independent verifications of one tree."""

    verifier: str
    temperature: float
    n: int
    exit_counts: torch.Tensor  # (N+1,) draws that exited at each node
    length_counts: torch.Tensor  # (max_depth+2,) draws per block length L = depth(exit) + 1
    bonus_counts: BonusCounts
    seconds: float

    @property
    def mean_block_length(self) -> float:
        lengths = torch.arange(self.length_counts.numel(), dtype=torch.float64)
        return float((lengths * self.length_counts).sum()) / self.n

    @property
    def block_length_stderr(self) -> float:
        """Standard error of `mean_block_length`."""
        lengths = torch.arange(self.length_counts.numel(), dtype=torch.float64)
        second = float((lengths.square() * self.length_counts).sum()) / self.n
        return math.sqrt(max(second - self.mean_block_length ** 2, 0.0) / self.n)


@dataclass(frozen=True)
class ExitLaw:
    """The law of an exact verifier's verdict on one tree: exit at v with X(v), bonus from the masked row."""

    tree: DraftTree
    node_logits: torch.Tensor
    temperature: float
    flow: TargetFlow

    @property
    def exit_mass(self) -> torch.Tensor:
        return self.flow.exit_mass

    def bonus_probs(self, node: int) -> torch.Tensor:
        """(V,) float64: p(.|node) at T without node's child tokens, renormalised."""
        return _bonus_row(self.tree, self.node_logits, self.temperature, node).cpu()


def _bonus_row(tree: DraftTree, node_logits: torch.Tensor, temperature: float, node: int) -> torch.Tensor:
    """The bonus law at exit `node`: p(.|node) at T without node's child tokens (float64, logits' device)."""
    row = node_logits[node].double()
    return masked_probs(row, temperature, child_token_row(tree, node, row.numel(), row.device))


def exit_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> ExitLaw:
    """The analytic verdict law of an exact (optimal) verifier on `tree`."""
    temperature = check_inputs(tree, node_logits, temperature)
    return ExitLaw(tree, node_logits, temperature, target_flow(tree, node_logits, temperature))


ExitSampler = Callable[[DraftTree, torch.Tensor, float, torch.Generator, int], torch.Tensor]


def _child_table(tree: DraftTree) -> torch.Tensor:
    """(N+1) x K child node ids in index order, padded with -1 (K = most children of a node)."""
    children = tree.children()
    width = max(1, max(len(kids) for kids in children))
    return torch.tensor([kids + [-1] * (width - len(kids)) for kids in children], dtype=torch.long)


def _exits_tev(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
               generator: torch.Generator, n: int) -> torch.Tensor:
    """n categorical draws over TEV's own X."""
    return sample_index(tev_exit_mass(tree, node_logits, temperature), generator, n)


def _exits_predraw(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                   generator: torch.Generator, n: int) -> torch.Tensor:
    """Follow the draws: at a node, the target draw hits child c with a(c), or no child with 1 - m."""
    device = node_logits.device
    edge = parent_edge_log_probs(tree, node_logits, temperature).exp()
    table = _child_table(tree).to(device)
    hits = torch.where(table >= 0, edge[table.clamp_min(0)], 0.0)
    outcome = torch.cat([hits, (1.0 - hits.sum(-1, keepdim=True)).clamp_min(0.0)], -1)
    cdf = outcome.cumsum(-1)
    cdf = cdf / cdf[:, -1:]
    successor = torch.cat([table, torch.arange(tree.num_nodes, device=device)[:, None]], -1)
    node = torch.zeros(n, dtype=torch.long, device=device)
    live = torch.arange(n, device=device)  # draws whose last draw hit a child
    for _ in range(tree.max_depth):
        at = node[live]
        uniform = torch.rand(live.numel(), 1, generator=generator, dtype=torch.float64, device=device)
        pick = torch.searchsorted(cdf[at], uniform, right=True).squeeze(-1).clamp_max(table.shape[1])
        following = successor[at, pick]
        node[live] = following
        live = live[following != at]
    return node


def _exits_by_tries(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                    generator: torch.Generator, n: int, residual: bool) -> torch.Tensor:
    """Children tried in index order, one uniform each; the first accepted child is followed.

    residual=True: accept c when u * (mass left after the rejected earlier
    siblings) < p(x_c), the residual rule. residual=False: the foil,
    u * q(x_c) < p(x_c). A child's bar depends only on its node, so all
    tries of all live draws are one (draws x K) comparison per level.
    """
    device = node_logits.device
    edge = parent_edge_log_probs(tree, node_logits, temperature).exp()
    table = _child_table(tree).to(device)
    real = table >= 0
    p = torch.where(real, edge[table.clamp_min(0)], 0.0)
    if residual:
        bar = (1.0 - (p.cumsum(-1) - p)).clamp_min(0.0)
    else:
        bar = torch.where(real, tree.draft_logp.double().exp().to(device)[table.clamp_min(0)], 1.0)
    node = torch.zeros(n, dtype=torch.long, device=device)
    live = torch.arange(n, device=device)  # draws that accepted a child at the last level
    for _ in range(tree.max_depth):
        at = node[live]
        uniform = torch.rand(live.numel(), table.shape[1], generator=generator, dtype=torch.float64, device=device)
        accepted = uniform * bar[at] < p[at]
        moved = accepted.any(-1)
        first = accepted.to(torch.uint8).argmax(-1)
        live, at, first = live[moved], at[moved], first[moved]
        node[live] = table[at, first]
    return node


def _exits_residual(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                    generator: torch.Generator, n: int) -> torch.Tensor:
    return _exits_by_tries(tree, node_logits, temperature, generator, n, residual=True)


def _exits_naive_ratio(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                       generator: torch.Generator, n: int) -> torch.Tensor:
    return _exits_by_tries(tree, node_logits, temperature, generator, n, residual=False)


def _bonus_counts(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                  exit_counts: torch.Tensor, generator: torch.Generator) -> BonusCounts:
    """Per exit node, its bonus draws from the masked row in one multinomial call."""
    out: BonusCounts = {}
    for node in torch.nonzero(exit_counts).flatten().tolist():
        law = _bonus_row(tree, node_logits, temperature, node)
        tokens, counts = torch.unique(sample_index(law, generator, int(exit_counts[node])), return_counts=True)
        out[node] = (tokens.cpu(), counts.cpu())
    return out


Counts = tuple[torch.Tensor, BonusCounts]


def _sampled_counts(sampler: ExitSampler) -> Callable[..., Counts]:
    def counts(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
               generator: torch.Generator, n: int) -> Counts:
        exits = sampler(tree, node_logits, temperature, generator, n)
        exit_counts = torch.bincount(exits, minlength=tree.num_nodes).cpu()
        return exit_counts, _bonus_counts(tree, node_logits, temperature, exit_counts, generator)
    return counts


def _greedy_counts(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                   generator: torch.Generator, n: int) -> Counts:
    """Greedy is deterministic: n copies of its one verdict."""
    verdict = verify_greedy(tree, node_logits, temperature, generator)
    exit_counts = torch.zeros(tree.num_nodes, dtype=torch.long)
    exit_counts[verdict.exit_node] = n
    return exit_counts, {verdict.exit_node: (torch.tensor([verdict.bonus_token]), torch.tensor([n]))}


def _chain_counts(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                  generator: torch.Generator, n: int) -> Counts:
    """Predraw on the top-1 chain, its node ids mapped back onto the tree."""
    chain, ids = chain_subtree(tree)
    chain_logits = node_logits.index_select(0, ids.to(node_logits.device))
    chain_exits, chain_bonus = _sampled_counts(_exits_predraw)(chain, chain_logits, temperature, generator, n)
    exit_counts = torch.zeros(tree.num_nodes, dtype=torch.long).index_add_(0, ids, chain_exits)
    return exit_counts, {int(ids[node]): counts for node, counts in chain_bonus.items()}


_COUNTS: dict[str, Callable[..., Counts]] = {
    "tev": _sampled_counts(_exits_tev),
    "predraw": _sampled_counts(_exits_predraw),
    "residual": _sampled_counts(_exits_residual),
    "greedy": _greedy_counts,
    "chain": _chain_counts,
    "naive_ratio": _sampled_counts(_exits_naive_ratio),
}


def simulate(name: str, tree: DraftTree, node_logits: torch.Tensor, temperature: float,
             n: int, seed: int) -> SimulationResult:
    """n independent verifications of `tree` by verifier `name`, vectorised over the draws."""
    get_verifier(name)
    temperature = check_inputs(tree, node_logits, temperature)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    start = time.perf_counter()
    generator = make_generator(seed, node_logits.device)
    exit_counts, bonus_counts = _COUNTS[name](tree, node_logits, temperature, generator, int(n))
    length_counts = torch.zeros(tree.max_depth + 2, dtype=torch.long).index_add_(0, tree.depths + 1, exit_counts)
    return SimulationResult(name, temperature, int(n), exit_counts, length_counts, bonus_counts,
                            time.perf_counter() - start)
