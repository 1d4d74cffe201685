"""Many fresh trees at one context: a sampled builder's draws, each scored by the target.

Every round starts at the same context, so an exact rule's first emitted
token is a sample of the target's row there whatever tree was drawn: rounds
at one context test a rule over the draw of the tree, and set E[L] against
E[1 + C] and against the fixed best-first tree of the same drafter, as large as
the largest drawn tree (`matched_budget`: a sampled builder's draws often fill
less than the budget, so "the same budget" would give the fixed tree more
nodes); `simulate.verify_rounds` runs the rules on them. The drafting and building
are the decoding loop's own steps (`propose`, `build_tree`); nothing is
committed, so every round sees the same context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from tevcore.decoding.loop import build_tree, propose
from tevcore.engine.builder_specs import BUILDER_FAMILIES, BuilderSpec
from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import make_generator, probs
from tevcore.engine.tree import DraftTree
from tevcore.proposer_protocol import Proposer
from tevcore.target.loading import Target
from tevcore.target.session import TargetSession


@dataclass(frozen=True)
class SampledRounds:
    """Independent draws of one sampled builder's tree at one context, each with its target rows (node logits),
    and the fixed best-first tree of the same drafter at the same context and size (`matched_budget`), scored (the
    other school)."""

    builder: BuilderSpec
    temperature: float
    rounds: list[tuple[DraftTree, torch.Tensor]]
    best_first: tuple[DraftTree, torch.Tensor]

    @property
    def best_first_length(self) -> float:
        """1 + C of the fixed best-first tree: E[L] of TEV there."""
        tree, logits = self.best_first
        return target_flow(tree, logits, self.temperature, missing_k=0).expected_length

    def sizes(self) -> tuple[float, int, int]:
        """Nodes of the drawn trees (the root not counted): mean, smallest, largest."""
        found = [tree.size for tree, _ in self.rounds]
        return sum(found) / len(found), min(found), max(found)

    def size_note(self) -> str:
        """Both schools' tree sizes, as a comparison of them must state them."""
        mean, low, high = self.sizes()
        return (f"best-first tree of {self.best_first[0].size} nodes against {self.builder} trees of {mean:.1f} nodes "
                f"on average ({low} to {high})")

    @property
    def context_probs(self) -> torch.Tensor:
        """The target's row at the rounds' one context (the root), at the rounds' temperature."""
        return probs(self.rounds[0][1][0].double(), self.temperature)


def check_sampled(builder: BuilderSpec, rounds: int) -> None:
    """Refuse a builder whose trees are not drawn (every draw would give the same tree) or a round count below 1."""
    if not builder.sampled:
        drawn = [f.pattern for f in BUILDER_FAMILIES.values() if f.draws]
        raise ValueError(f"builder {builder.name!r} builds fixed trees; these rounds draw sampled trees: use "
                         f"{' or '.join(drawn)}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")


def matched_budget(drawn: Sequence[tuple[DraftTree, torch.Tensor]], budget: int) -> int:
    """The fixed tree's budget for a fair comparison with `drawn`: the largest drawn tree's size, never above
    `budget` (a sampled:2,1,1 tree holds at most 6 nodes, so a budget-16 best-first tree would be no peer)."""
    return max(1, min(budget, max(tree.size for tree, _ in drawn)))


def rounds_at_context(target: Target, proposer: Proposer, context: Sequence[int], builder: BuilderSpec, budget: int,
                      temperature: float, rounds: int, seed: int,
                      progress: Callable[[int, int], None] | None = None) -> SampledRounds:
    """`rounds` trees drawn by `builder` (sampled:K1,..., sampled-wor:K1,... or a mixed one) from `proposer`
    after `context` (prompt and committed tokens; its last token is the root), each scored by `target` in one
    tree forward. One generator (from `seed`) draws every tree; `progress(done, total)` is called after each
    tree."""
    check_sampled(builder, rounds)
    builder.check_depth(proposer.depth)
    if budget < 1:
        raise ValueError(f"budget must be at least 1 node, got {budget}")
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(list(context), reserve=proposer.depth + 1)
    generator = make_generator(seed, session.device)

    def scored(tree_builder: BuilderSpec, nodes: int = budget) -> tuple[DraftTree, torch.Tensor]:
        proposal = propose(proposer, session, tree_builder, nodes, temperature, generator)
        tree = build_tree(tree_builder, session.root_token, proposal, nodes, temperature, generator)
        logits = session.score_tree(tree).logits.cpu()
        session.rollback()
        return tree, logits

    drawn = []
    for done in range(1, rounds + 1):
        drawn.append(scored(builder))
        if progress is not None:
            progress(done, rounds)
    return SampledRounds(builder, float(temperature), drawn,
                         scored(BUILDER_FAMILIES["best_first"].spec(), matched_budget(drawn, budget)))
