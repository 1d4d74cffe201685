"""The `Proposer` interface: what the decoding loop asks of a drafter each round.

It sits below both the drafters (tevcore/proposers) and the loop
(tevcore/decoding), so neither imports the other: the loop knows only this
interface, a drafter only the target session it reads.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from tevcore.engine.draft_rows import DraftRows
from tevcore.engine.records import RoundRecord
from tevcore.engine.builder_specs import BuilderSpec
from tevcore.engine.tree import DraftTree
from tevcore.target.session import TargetSession


# (the tokens of a node's path below the root, that node's (V,) draft log-probs) -> the log-probs its children come
# from: how a wrapper (the context lookup) reweighs the rows of a proposer that grows its own tree
RowMix = Callable[[list[int], torch.Tensor], torch.Tensor]


class Proposer(Protocol):
    """Anything that can propose per-depth draft distributions for the next round.

    The decode loop calls, per round: `has_cheap_evidence(session)` (only
    when trimming: whether it knows, without drafting, that this round is
    promising; see `skip_gate`), `propose(session)` (unless the gate skips
    drafting) and, once after the round's commit, `observe_round(session,
    record)`. Before `propose`, it asks `propose_tree(session, builder,
    budget, temperature, generator)`: a proposer whose rows depend on the
    path (a draft LM) returns the round's whole tree there, every other one
    None, and the loop builds the tree from `propose`. A sampled builder's
    tree is drawn at the round's temperature with the round's generator, so
    both reach `propose_tree` as they reach the loop's own builders; `mix`,
    where a wrapper gives one, reweighs each node's row given its path before
    the node's children are chosen from it. `ProposerBase` gives the three
    optional calls their defaults, so a proposer that keeps itself in sync
    inside `propose` inherits them.
    """

    name: str
    depth: int
    hidden_layers: tuple[int, ...]  # target layers whose hidden states it reads from the session
    stand_in: bool  # True for a teaching stand-in that is not a real drafter

    def propose(self, session: TargetSession) -> torch.Tensor | DraftRows:
        """(depth x V) draft log-probabilities for depths 1..depth after the session's root."""
        ...

    def has_cheap_evidence(self, session: TargetSession) -> bool:
        """Whether this round is promising, known without drafting."""
        ...

    def propose_tree(self, session: TargetSession, builder: BuilderSpec, budget: int, temperature: float,
                     generator: torch.Generator, mix: RowMix | None = None) -> DraftTree | None:
        """The round's whole tree, for a proposer whose rows depend on the path; None to build from `propose`."""
        ...

    def observe_round(self, session: TargetSession, record: RoundRecord) -> None:
        """Feedback after the round committed: what was drafted, accepted and emitted."""
        ...
