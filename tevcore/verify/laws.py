"""The law each rule must follow on a fixed tree, and the one chi-square test of counts against it.

An optimal exact rule (tev, predraw, residual) exits at v with X(v) and draws
its bonus from p(.|v) without v's child tokens. Chain-only is exact with its
own law: X of the top-1 chain, and a bonus that masks only the chain child it
tried (the other children of the tree are legal bonus tokens for it). Greedy
follows the T = 0 law whatever the temperature. The foil is measured against
X, the law it would need to be exact. The exit law comes from
`flow.target_flow` (exact form); the rules themselves are not used here.
The proposal-ratio rules (rrs, block) have, given one sampled tree, their own
law read off their acceptance tables (`rrs_law`, `block_law`): exits by the tries'
acceptance probabilities, the bonus from the residual at the exit
(`rrs_fixed_first_law`: the earlier point-mass-first order on mixed trees). It is
exact only over the tree's draws, which the enumeration tests prove.

`chi_square` pools cells expected below 5 (smallest first) into one cell;
a draw in a zero-probability cell is an infinite statistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch
from scipy import stats

from tevcore.engine.flow import TargetFlow, target_flow
from tevcore.engine.sampling import masked_probs
from tevcore.engine.tree import DraftTree
from tevcore.verify.ratio_tables import BlockTables, RrsTables
from tevcore.verify.scored import chain_subtree

MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class VerdictLaw:
    """Exit probabilities over the tree's nodes and, per exit node, the banned bonus tokens."""

    tree: DraftTree
    node_logits: torch.Tensor
    temperature: float  # the temperature of the bonus law (0 for greedy)
    flow: TargetFlow  # the flow of the tree the rule verifies (the chain's for chain-only)
    exit_probs: torch.Tensor  # (N+1,) float64 on the tree's node ids
    banned_tokens: dict[int, list[int]]  # exit node -> tokens its bonus may not be
    bonus_rows: dict[int, torch.Tensor] | None = None  # exit node -> its own bonus law (a residual), if any
    moves_on: torch.Tensor | None = None  # (N+1,) per node, the chance to go on to a child once there, where known

    @property
    def exit_mass(self) -> torch.Tensor:
        return self.exit_probs

    @property
    def expected_length(self) -> float:
        """E[L] = sum over v of Pr(exit at v) (depth(v) + 1)."""
        return float((self.exit_probs * (self.tree.depths + 1).double()).sum())

    def bonus_probs(self, node: int) -> torch.Tensor:
        """(V,) float64 on CPU: the bonus law at exit `node`."""
        if self.bonus_rows is not None and int(node) in self.bonus_rows:
            return self.bonus_rows[int(node)].double().cpu()
        row = self.node_logits[node].double().cpu()
        banned = torch.zeros(row.numel(), dtype=torch.bool)
        banned[self.banned_tokens.get(int(node), [])] = True
        return masked_probs(row, self.temperature, banned)


def _child_tokens(tree: DraftTree) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {node: [] for node in range(tree.num_nodes)}
    for child, parent in enumerate(tree.parents.tolist()[1:], start=1):
        out[parent].append(int(tree.tokens[child]))
    return out


def exit_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """The law of every optimal exact verifier on `tree`: exit X(v), bonus p(.|v) without v's children."""
    flow = target_flow(tree, node_logits, temperature, missing_k=0)
    return VerdictLaw(tree, node_logits, flow.temperature, flow, flow.exit_mass.double(), _child_tokens(tree),
                      moves_on=flow.child_mass.double())


def chain_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """Chain-only's own law: X of the top-1 chain on the tree's node ids; the bonus masks the chain child only."""
    chain, ids = chain_subtree(tree)
    flow = target_flow(chain, node_logits.index_select(0, ids.to(node_logits.device)), temperature, missing_k=0)
    exit_probs = torch.zeros(tree.num_nodes, dtype=torch.float64).index_add_(0, ids, flow.exit_mass.double())
    banned = {int(ids[i]): ([int(chain.tokens[i + 1])] if i + 1 < len(ids) else []) for i in range(len(ids))}
    return VerdictLaw(tree, node_logits, flow.temperature, flow, exit_probs, banned)


def greedy_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """Greedy's law whatever the temperature: the T = 0 verdict (the argmax path, the argmax bonus)."""
    return exit_law(tree, node_logits, 0.0)


OPTIMAL = "optimal"  # exact for the target at this temperature, exit law X: reaches 1 + C
OWN_LAW = "own law"  # exact for the target with a law of its own (chain-only: X of the top-1 chain)
T0_ONLY = "exact for T = 0 only"  # decodes the T = 0 target whatever the temperature: not this one at T > 0
OVER_DRAWS = "exact over the draws"  # rrs, block: exact only over the sampled tree's randomness
FOIL = "not exact"  # the teaching foil


def block_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """Block verification's law on one sampled chain, from its tables: the exit is the last chain node whose
    Bernoulli(h) succeeds; the bonus is the block residual there (which may repeat the next chain token)."""
    flow = target_flow(tree, node_logits, temperature, missing_k=0)
    n = tree.num_nodes
    exit_probs = torch.zeros(n, dtype=torch.float64)
    tables = BlockTables(tree, node_logits, flow.temperature, flow.edge_prob)
    stop = tables.stops().tolist()
    for tau in range(n):
        later = torch.tensor(stop[tau:], dtype=torch.float64)
        exit_probs[tau] = (stop[tau - 1] if tau else 1.0) * float((1.0 - later).prod())
    return VerdictLaw(tree, node_logits, flow.temperature, flow, exit_probs, {}, tables.residuals())


def rrs_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """Recursive rejection's law on one sampled tree, from its tables: each try accepted with its probability in
    try order (a mixed node's drawn siblings first, its fixed children last); the bonus is the residual left at
    the exit."""
    return _rrs_law(tree, node_logits, temperature, fixed_last=True)


def rrs_fixed_first_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """The earlier order's law on a mixed tree (each fixed child tried first as a point mass, the drawn siblings
    then against the residual without it): exact too, kept to measure what siblings-first gains."""
    return _rrs_law(tree, node_logits, temperature, fixed_last=False)


def _rrs_law(tree: DraftTree, node_logits: torch.Tensor, temperature: float, fixed_last: bool) -> VerdictLaw:
    flow = target_flow(tree, node_logits, temperature, missing_k=0)
    n = tree.num_nodes
    exit_probs = torch.zeros(n, dtype=torch.float64)
    tables = RrsTables(tree, node_logits, flow.temperature, flow.edge_prob, fixed_last=fixed_last)
    reach = torch.zeros(n, dtype=torch.float64)
    reach[0] = 1.0
    moves_on = torch.zeros(n, dtype=torch.float64)
    accepts = tables.accept.tolist()
    for node in range(n):  # parents precede children
        left, rejected = float(reach[node]), 1.0
        for child, accept in zip(tables.table[node].tolist(), accepts[node]):
            if child < 0:
                break
            reach[child] += left * accept
            left *= 1.0 - accept
            rejected *= 1.0 - accept
        exit_probs[node] = left
        moves_on[node] = 1.0 - rejected
    banned = _child_tokens(tree)  # a rejected draw has no residual mass left
    return VerdictLaw(tree, node_logits, flow.temperature, flow, exit_probs, banned, tables.residuals(), moves_on)


def node_acceptance(law: VerdictLaw) -> torch.Tensor:
    """(N+1,) float64: per node, the probability the rule moves on to one of its children given that it reached
    the node: the law's own `moves_on` where it states it (the optimal rules: m(v); rrs: from its tries, also at
    a node it never reaches), else 1 - exit there / reach there (0 where it is never reached)."""
    if law.moves_on is not None:
        return law.moves_on
    tree = law.tree
    reach = law.exit_probs.clone()
    for node in range(tree.num_nodes - 1, 0, -1):  # children follow their parents
        reach[int(tree.parents[node])] += reach[node]
    return torch.where(reach > 0, 1.0 - law.exit_probs / reach.clamp_min(1e-300), 0.0)


def chi_square(observed: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson statistic and degrees of freedom of counts against probabilities, small cells pooled."""
    observed, probs = np.asarray(observed, dtype=float), np.asarray(probs, dtype=float)
    if (observed[probs <= 0] > 0).any():
        return float("inf"), 1
    keep = probs > 0
    observed, expected = observed[keep], probs[keep] / probs[keep].sum() * observed.sum()
    order = np.argsort(expected, kind="stable")
    observed, expected = observed[order], expected[order]
    small = int((expected < MIN_EXPECTED).sum())
    cut = max(small, int(np.searchsorted(np.cumsum(expected), MIN_EXPECTED)) + 1) if small else 0
    if cut:
        observed = np.concatenate([[observed[:cut].sum()], observed[cut:]])
        expected = np.concatenate([[expected[:cut].sum()], expected[cut:]])
    if len(expected) < 2:
        return 0.0, 0
    return float(((observed - expected) ** 2 / expected).sum()), len(expected) - 1


def chi_square_pvalue(statistic: float, dof: int) -> float:
    """Upper tail of the chi-square law; 1 when there is nothing to test (dof 0)."""
    return 1.0 if dof == 0 else float(stats.chi2.sf(statistic, dof))


def summed_pvalue(tests: Iterable[tuple[float, int]]) -> float:
    """p-value of independent chi-square tests together: statistics and degrees of freedom summed."""
    total, dof = 0.0, 0
    for statistic, node_dof in tests:
        total, dof = total + statistic, dof + node_dof
    return chi_square_pvalue(total, dof)


def exit_pvalue(exit_counts: torch.Tensor, law: VerdictLaw) -> float:
    """Exit counts over the tree's nodes against the law's exit probabilities."""
    return chi_square_pvalue(*chi_square(exit_counts.double().numpy(), law.exit_probs.numpy()))


def bonus_pvalue(bonus_counts: dict[int, tuple[torch.Tensor, torch.Tensor]], law: VerdictLaw,
                 nodes: Iterable[int] | None = None) -> float:
    """Bonus tokens given the exit against the law's masked rows, summed over exit nodes (or only `nodes`)."""
    vocab = law.node_logits.shape[-1]
    chosen = bonus_counts if nodes is None else {n: bonus_counts[n] for n in nodes if n in bonus_counts}
    tests = []
    for node, (tokens, counts) in chosen.items():
        observed = np.zeros(vocab)
        observed[tokens.numpy()] = counts.numpy()
        tests.append(chi_square(observed, law.bonus_probs(node).numpy()))
    return summed_pvalue(tests)
