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

Kept rounds need not keep their rows. A tree's full-vocabulary target rows (the
bulk of a round: 65 rows of 49k floats for a 64-node tree) are what a rule's
residuals and bonus draws read, at nodes that depend on the rule's seed, so no
smaller summary serves every later rule exactly. With `keep_rows=False` the
rounds keep only the trees and a fingerprint of each tree's rows
(`RescoredRounds`): what is worked out while the rows are at hand is kept
(every applicable rule's verdicts at the draw's seed, the context's row, the
design ceilings), and a later read scores the tree again in one forward over
the same context, bitwise the rows it was drawn with (checked against the
fingerprint; a difference is refused, never used).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch

from tevcore.decoding.loop import build_tree, propose
from tevcore.engine.builder_specs import BUILDER_FAMILIES, BuilderSpec
from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import make_generator, probs
from tevcore.engine.tree import DraftTree
from tevcore.lab.ceilings import design_ceilings, gap_by_depth, node_ceilings
from tevcore.lab.simulate import RoundsResult, verify_rounds
from tevcore.proposer_protocol import Proposer
from tevcore.target.loading import Target
from tevcore.target.session import TargetSession
from tevcore.verify.registry import rules_for

Scored = tuple[DraftTree, torch.Tensor]  # a tree and its target rows (node logits)
ROW_BYTES = 4  # a target row's entry (float32)
PROPOSAL_BYTES = 8  # a drafter's proposal row's entry (float64, in a sampled tree's draw record)
# per node: its token, parent, draft log-prob and depth; its draw (parent, child, q, the fixed flag) and proposal row
TREE_NODE_BYTES = (8 + 8 + 4 + 8) + (8 + 8 + 8 + 1) + 8
VERDICT_BYTES = 8 + 8 + 8 + 8  # per rule and round: block length, first token, 1 + C and Var(L | tree)
PROPOSAL_POOL = 4  # distinct proposal-row tensors a draw compares each tree's with (`share_proposals`)


def rows_fingerprint(logits: torch.Tensor) -> bytes:
    """A digest of a tree's rows, bit for bit: the same rows give the same digest, any other rows another."""
    return hashlib.blake2b(logits.detach().cpu().contiguous().numpy().tobytes(), digest_size=16).digest()


class RescoredRounds(Sequence[Scored]):
    """Drawn trees without their target rows: reading round i scores its tree again (one tree forward over the
    rounds' context, as it was drawn) and hands back exactly the rows it was drawn with, checked bit for bit; an
    iteration scores every tree once after one prefill. The last round read is kept (a page reads one round at
    each rerun); `first_rows`, the first tree's rows as drawn, starts as that round, so the first look at the
    rounds needs no forward (and no second wait in a busy room's queue)."""

    def __init__(self, trees: Sequence[DraftTree], fingerprints: Sequence[bytes],
                 rescore: Callable[[Sequence[DraftTree]], Iterator[torch.Tensor]],
                 first_rows: torch.Tensor | None = None) -> None:
        if len(trees) != len(fingerprints):
            raise ValueError("rescored rounds need one fingerprint per tree")
        self.trees = tuple(trees)
        self.fingerprints = tuple(fingerprints)
        self._rescore = rescore
        self._last: tuple[int, torch.Tensor] | None = None
        if first_rows is not None:
            self._last = (0, self._checked(0, first_rows))

    def at_hand(self, index: int) -> bool:
        """Whether reading round `index` needs no forward (it is the round kept)."""
        return self._last is not None and self._last[0] == range(len(self))[index]

    def __len__(self) -> int:
        return len(self.trees)

    def __getitem__(self, index):  # a slice gives a list of rounds, an int one round
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        index = range(len(self))[index]
        if self._last is None or self._last[0] != index:
            self._last = (index, self._checked(index, next(self._rescore([self.trees[index]]))))
        return self.trees[index], self._last[1]

    def __iter__(self) -> Iterator[Scored]:
        for index, logits in enumerate(self._rescore(self.trees)):
            yield self.trees[index], self._checked(index, logits)

    def _checked(self, index: int, logits: torch.Tensor) -> torch.Tensor:
        if rows_fingerprint(logits) != self.fingerprints[index]:
            raise ValueError(f"round {index}'s tree scored again gave other target rows than when it was drawn (the "
                             "server's device or threads changed since): draw the trees again")
        return logits

    @property
    def nbytes(self) -> int:
        """Bytes this object holds itself: the fingerprints and the last round read (the trees are counted by
        `kept_bytes`)."""
        return sum(len(f) for f in self.fingerprints) + (0 if self._last is None else self._last[1].nbytes)


@dataclass(frozen=True)
class SampledRounds:
    """Independent draws of one sampled builder's tree at one context, each with its target rows (node logits),
    and the fixed best-first tree of the same drafter at the same context and size (`matched_budget`), scored (the
    other school).

    `rounds` is a list of (tree, rows), or `RescoredRounds` when the rows were let go: then `verified` holds every
    applicable rule's verdicts over the rounds at `verified_seed` (made while the rows were at hand),
    `root_row` the context's target row and `ceilings` the design ceilings (`lab.ceilings.design_ceilings`)."""

    builder: BuilderSpec
    temperature: float
    rounds: Sequence[Scored]
    best_first: Scored
    verified: dict[str, RoundsResult] = field(default_factory=dict)
    verified_seed: int | None = None
    root_row: torch.Tensor | None = None
    ceilings: dict[str, list[dict]] | None = None

    @property
    def trees(self) -> Sequence[DraftTree]:
        """The drawn trees (without scoring any again)."""
        return self.rounds.trees if isinstance(self.rounds, RescoredRounds) else [tree for tree, _ in self.rounds]

    @property
    def best_first_length(self) -> float:
        """1 + C of the fixed best-first tree: E[L] of TEV there."""
        tree, logits = self.best_first
        return target_flow(tree, logits, self.temperature, missing_k=0).expected_length

    def sizes(self) -> tuple[float, int, int]:
        """Nodes of the drawn trees (the root not counted): mean, smallest, largest."""
        found = [tree.size for tree in self.trees]
        return sum(found) / len(found), min(found), max(found)

    def size_note(self) -> str:
        """Both schools' tree sizes, as a comparison of them must state them."""
        mean, low, high = self.sizes()
        return (f"best-first tree of {self.best_first[0].size} nodes against {self.builder} trees of {mean:.1f} nodes "
                f"on average ({low} to {high})")

    @property
    def context_probs(self) -> torch.Tensor:
        """The target's row at the rounds' one context (the root), at the rounds' temperature."""
        row = self.root_row if self.root_row is not None else self.rounds[0][1][0]
        return probs(row.double(), self.temperature)

    def verify(self, names: Sequence[str], seed: int,
               between: Callable[[], None] | None = None) -> dict[str, RoundsResult]:
        """Each rule in `names` once on every round (`simulate.verify_rounds`): the verdicts made at the draw when
        the seed and rules are those, else the rules run on the rounds (scoring rescored trees again; `between()`,
        where given, is called before each round, so a page that is gone stops the work there). Either way the very
        verdicts `verify_rounds` gives: one generator per rule, so a rule's verdicts do not depend on which other
        rules ran."""
        if seed == self.verified_seed and all(name in self.verified for name in names):
            return {name: self.verified[name] for name in names}
        return verify_rounds(list(names), self.rounds if between is None else _each_after(between, self.rounds),
                             self.temperature, seed)

    def at_hand(self, index: int) -> bool:
        """Whether round `index`'s rows are held (kept rows, or the rescored round last read): reading it computes
        nothing."""
        return not isinstance(self.rounds, RescoredRounds) or self.rounds.at_hand(index)

    def design_ceilings(self) -> dict[str, list[dict]]:
        """Each design against its own ceiling per depth (`lab.ceilings.design_ceilings`), kept from the draw when
        the rows were let go."""
        return self.ceilings if self.ceilings is not None else design_ceilings(self)

    def kept_bytes(self) -> int:
        """Bytes of every tensor these rounds keep (each counted once, however many trees share it), the rescored
        rounds' own fingerprints and last round read: what the session holds for them."""
        seen: dict[tuple[int, int], int] = {}

        def count(tensor: torch.Tensor | None) -> None:
            if tensor is not None:
                seen[(tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())] = \
                    tensor.untyped_storage().nbytes()

        for tree in [*self.trees, self.best_first[0]]:
            for tensor in (tree.tokens, tree.parents, tree.draft_logp, tree.depths):
                count(tensor)
            if tree.draws is not None:
                for tensor in (tree.draws.parents, tree.draws.children, tree.draws.q, tree.draws.rows,
                               tree.draws.row_of, tree.draws.fixed):
                    count(tensor)
        if not isinstance(self.rounds, RescoredRounds):
            for _, logits in self.rounds:
                count(logits)
        count(self.best_first[1])
        count(self.root_row)
        for result in self.verified.values():
            for tensor in (result.emitted, result.expected_lengths, result.first_tokens, result.law_variances):
                count(tensor)
        own = self.rounds.nbytes if isinstance(self.rounds, RescoredRounds) else 0
        return sum(seen.values()) + own


def estimated_kept_bytes(rounds: int, budget: int, vocab: int, depth: int, keep_rows: bool,
                         rules: int = 0) -> int:
    """An upper estimate, made before any work, of the bytes `rounds` trees of at most `budget` nodes keep over a
    `vocab`-token target: the trees and their draws; the drafter's proposal rows (`depth` rows, shared by every
    round of a per-depth drafter, in at most `PROPOSAL_POOL` shapes; a drafter whose rows depend on the path keeps
    more, which the draw counts as it goes); the best-first tree's rows; and either every tree's rows
    (`keep_rows`) or the context's row, one round read again, the fingerprints and the verdicts of `rules` rules."""
    nodes = budget + 1
    trees = (rounds + 1) * nodes * TREE_NODE_BYTES
    proposals = PROPOSAL_POOL * depth * vocab * PROPOSAL_BYTES
    best_first = nodes * vocab * ROW_BYTES
    if keep_rows:
        return trees + proposals + best_first + rounds * nodes * vocab * ROW_BYTES
    return (trees + proposals + best_first + vocab * ROW_BYTES + nodes * vocab * ROW_BYTES + rounds * 16
            + rules * rounds * VERDICT_BYTES)


def check_sampled(builder: BuilderSpec, rounds: int) -> None:
    """Refuse a builder whose trees are not drawn (every draw would give the same tree) or a round count below 1."""
    if not builder.sampled:
        drawn = [f.pattern for f in BUILDER_FAMILIES.values() if f.draws]
        raise ValueError(f"builder {builder.name!r} builds fixed trees; these rounds draw sampled trees: use "
                         f"{' or '.join(drawn)}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")


def matched_budget(drawn: Sequence[DraftTree], budget: int) -> int:
    """The fixed tree's budget for a fair comparison with the `drawn` trees: the largest drawn tree's size, never
    above `budget` (a sampled:2,1,1 tree holds at most 6 nodes, so a budget-16 best-first tree would be no peer)."""
    return max(1, min(budget, max(tree.size for tree in drawn)))


def share_proposals(tree: DraftTree, pool: list[torch.Tensor]) -> tuple[DraftTree, int]:
    """`tree` with its draw record's proposal rows replaced by an equal tensor of `pool` (the last few distinct
    rows kept, which it joins when none is equal), and the bytes of proposal rows it adds: a per-depth drafter gives
    every round at one context the same rows (a few shapes, as the budget cuts the last depth's draws), so one
    copy of each is kept, not one a round."""
    rows = tree.draws.rows if tree.draws is not None else None
    if rows is None:
        return tree, 0
    for kept in pool:
        if kept.shape == rows.shape and torch.equal(kept, rows):
            return replace(tree, draws=replace(tree.draws, rows=kept)), 0
    pool[:] = [rows, *pool[:PROPOSAL_POOL - 1]]
    return tree, rows.nbytes


def rounds_at_context(target: Target, proposer: Proposer, context: Sequence[int], builder: BuilderSpec, budget: int,
                      temperature: float, rounds: int, seed: int,
                      progress: Callable[[int, int], None] | None = None, keep_rows: bool = True,
                      kept: Callable[[int], None] | None = None) -> SampledRounds:
    """`rounds` trees drawn by `builder` (sampled:K1,..., sampled-wor:K1,... or a mixed one) from `proposer`
    after `context` (prompt and committed tokens; its last token is the root), each scored by `target` in one
    tree forward. One generator (from `seed`) draws every tree; `progress(done, total)` is called after each
    tree. `keep_rows=False` lets each tree's rows go once its verdicts (every rule `rules_for` the builder, at
    `seed`) and ceilings are made (see the module's docstring); `kept(bytes)`, where given, is told after each
    tree the bytes its trees keep so far (a caller's budget can stop the draw there)."""
    check_sampled(builder, rounds)
    builder.check_depth(proposer.depth)
    if budget < 1:
        raise ValueError(f"budget must be at least 1 node, got {budget}")
    reserve = proposer.depth + 1
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(list(context), reserve=reserve)
    generator = make_generator(seed, session.device)

    def scored(tree_builder: BuilderSpec, nodes: int = budget) -> Scored:
        proposal = propose(proposer, session, tree_builder, nodes, temperature, generator)
        tree = build_tree(tree_builder, session.root_token, proposal, nodes, temperature, generator)
        logits = session.score_tree(tree).logits.cpu()
        session.rollback()
        return tree, logits

    trees: list[DraftTree] = []
    pool: list[torch.Tensor] = []
    fingerprints: list[bytes] = []
    ceilings = []
    root_rows: list[torch.Tensor] = []  # the first tree's root row: the context's row `context_probs` reads
    first_rows: list[torch.Tensor] = []  # the first tree's rows: the round a page shows first, kept as read
    held = 0

    def drawn() -> Iterator[Scored]:
        nonlocal held
        for done in range(1, rounds + 1):
            tree, logits = scored(builder)
            tree, proposal_bytes = share_proposals(tree, pool)
            trees.append(tree)
            if not keep_rows:
                fingerprints.append(rows_fingerprint(logits))
                ceilings.extend(node_ceilings(tree, logits, temperature, "rrs"))
                if not root_rows:
                    root_rows.append(logits[0].clone())
                    first_rows.append(logits.clone())
            if kept is not None:
                held += tree.num_nodes * TREE_NODE_BYTES + proposal_bytes + (
                    logits.nbytes if keep_rows else len(fingerprints[-1]))
                kept(held)
            if progress is not None:
                progress(done, rounds)
            yield tree, logits

    if keep_rows:
        scored_rounds = list(drawn())
        return SampledRounds(builder, float(temperature), scored_rounds,
                             scored(BUILDER_FAMILIES["best_first"].spec(), matched_budget(trees, budget)))
    verified = verify_rounds(rules_for(builder), drawn(), temperature, seed)
    best_first = scored(BUILDER_FAMILIES["best_first"].spec(), matched_budget(trees, budget))
    rescored = RescoredRounds(trees, fingerprints, _rescorer(target, proposer.hidden_layers, list(context), reserve),
                              first_rows[0])
    sampled = SampledRounds(builder, float(temperature), rescored, best_first, verified, seed, root_rows[0])
    return replace(sampled, ceilings={f"{builder.name} + rrs": gap_by_depth(ceilings),
                                      **design_ceilings(sampled, with_rrs=False)})


def _each_after(between: Callable[[], None], rounds: Sequence[Scored]) -> Iterator[Scored]:
    """`rounds` in one pass, `between()` called before each is read (and once after the last)."""
    between()
    for scored in rounds:
        yield scored
        between()


def _rescorer(target: Target, hidden_layers: tuple[int, ...], context: list[int],
              reserve: int) -> Callable[[Sequence[DraftTree]], Iterator[torch.Tensor]]:
    """Score trees again as `rounds_at_context` scored them: one session prefilled with `context` (the same room
    reserved), each tree in one forward, rolled back."""

    def rescore(trees: Sequence[DraftTree]) -> Iterator[torch.Tensor]:
        session = TargetSession(target, hidden_layers=hidden_layers)
        session.prefill(context, reserve=reserve)
        for tree in trees:
            logits = session.score_tree(tree).logits.cpu()
            session.rollback()
            yield logits

    return rescore
