"""`ScoredRound`: one scored tree as every verification rule reads it, validated once.

A rule needs the tree, the target's node logits, the temperature and the
round's target flow (a, m, X, from the row normalisers of the scored parents).
The decoding loop already computed that flow for its record, so it passes it
in and nothing is recomputed; alone, `scored_round` computes the lean flow
(no missing tokens). The per-tree tables the rules walk (children by index,
the top-1 chain) are built on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from tevcore.engine.flow import TargetFlow, check_node_logits, target_flow
from tevcore.engine.sampling import check_temperature
from tevcore.engine.tree import DraftTree
from tevcore.verify.ratio_tables import BlockTables, RrsTables


@dataclass(frozen=True)
class ScoredRound:
    """A validated (tree, node logits, temperature, flow); tables on the logits' device."""

    tree: DraftTree
    logits: torch.Tensor  # (N+1) x V target logits, row v after the context plus path(v)
    temperature: float
    flow: TargetFlow

    @property
    def device(self) -> torch.device:
        return self.logits.device

    @property
    def vocab_size(self) -> int:
        return int(self.logits.shape[-1])

    @cached_property
    def edge_prob(self) -> torch.Tensor:
        """a(v) as float64 on the logits' device (1 at the root)."""
        return self.flow.edge_prob.to(self.device, torch.float64)

    @cached_property
    def child_table(self) -> torch.Tensor:
        """(N+1) x K child node ids in index order, padded with -1 (K = most children of a node, >= 1)."""
        children = self.tree.children()
        width = max(1, max(len(kids) for kids in children))
        table = [kids + [-1] * (width - len(kids)) for kids in children]
        return torch.tensor(table, dtype=torch.long, device=self.device)

    @cached_property
    def child_probs(self) -> torch.Tensor:
        """(N+1) x K: a(c) of each child in `child_table`, 0 in the padding."""
        table = self.child_table
        return torch.where(table >= 0, self.edge_prob[table.clamp_min(0)], 0.0)

    @cached_property
    def rrs(self) -> RrsTables:
        """Recursive rejection's tables of a sampled tree (its draws' acceptance and residuals, on demand)."""
        return RrsTables(self.tree, self.logits, self.temperature, self.flow.edge_prob)

    @cached_property
    def block(self) -> BlockTables:
        """Block verification's stop probabilities and residuals of a sampled chain, on demand."""
        return BlockTables(self.tree, self.logits, self.temperature, self.flow.edge_prob)

    @cached_property
    def chain_nodes(self) -> torch.Tensor:
        """Node ids of the top-1 chain (at each node the child of highest draft log-prob), root first."""
        return chain_subtree(self.tree)[1]


def chain_subtree(tree: DraftTree) -> tuple[DraftTree, torch.Tensor]:
    """The tree's top-1 chain (at each node the child of highest draft log-prob) and its node ids."""
    children = tree.children()
    draft_logp = tree.draft_logp.tolist()
    nodes = [0]
    while children[nodes[-1]]:
        nodes.append(max(children[nodes[-1]], key=lambda child: draft_logp[child]))
    ids = torch.tensor(nodes, dtype=torch.long)
    chain = DraftTree(tokens=tree.tokens[ids], parents=torch.arange(-1, len(nodes) - 1),
                      draft_logp=tree.draft_logp[ids])
    return chain, ids


def scored_round(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                 flow: TargetFlow | None = None) -> ScoredRound:
    """The boundary of the verify wing: validate once, compute the lean flow only when none is given.

    A given flow was validated when it was computed; here it is only matched
    to the tree and the temperature (integer and float compares, no tensor work).
    """
    if flow is None:
        flow = target_flow(tree, node_logits, temperature, missing_k=0)
        return ScoredRound(tree, node_logits, flow.temperature, flow)
    temperature = check_temperature(temperature)
    if node_logits.dim() != 2 or node_logits.shape[0] != tree.num_nodes:
        check_node_logits(tree, node_logits)  # raises the shape error
    if flow.edge_prob.numel() != tree.num_nodes or flow.temperature != temperature:
        raise ValueError(f"the flow is of a {flow.edge_prob.numel()}-node tree at T = {flow.temperature}, "
                         f"not of this {tree.num_nodes}-node tree at T = {temperature}")
    return ScoredRound(tree, node_logits, temperature, flow)
