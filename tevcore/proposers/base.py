"""The no-op defaults of the `Proposer` interface, flat rows, and the greedy-rollout stand-in proposer.

A proposer (interface in tevcore/proposer_protocol.py) looks at a target session (its committed tokens, cached hidden
states and root token) and returns per-depth draft log-probabilities over the
target vocabulary (a K x V tensor, or `DraftRows` when some rows are
conditioned on the depth-1 token); a builder turns them into a tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from tevcore.engine.records import RoundRecord
from tevcore.engine.sampling import make_generator
from tevcore.engine.builder_specs import BuilderSpec
from tevcore.engine.tree import DraftTree
from tevcore.proposer_protocol import RowMix
from tevcore.target.session import TargetSession
from tevcore.target.walker import score_root, walk
from tevcore.proposers.kind import DrafterKind, keyword


@dataclass(frozen=True)
class HFAssistant:
    """A proposer's drafter as transformers' own assisted generation takes it: `bench` runs it as a peer row."""

    model: torch.nn.Module  # `generate(..., assistant_model=model)`
    method: str  # the bench row's name
    generate_kwargs: dict[str, Any] = field(default_factory=dict)  # beside it, e.g. speculation_type="dflash"


class ProposerBase:
    """The optional calls of the `Proposer` interface as no-ops, for every proposer to inherit."""

    hidden_layers: tuple[int, ...] = ()
    stand_in = False
    hf_assistant: HFAssistant | None = None  # no transformers peer unless a proposer offers one

    def has_cheap_evidence(self, session: TargetSession) -> bool:
        return False

    def propose_tree(self, session: TargetSession, builder: BuilderSpec, budget: int, temperature: float,
                     generator: torch.Generator, mix: RowMix | None = None) -> DraftTree | None:
        return None

    def observe_round(self, session: TargetSession, record: RoundRecord) -> None:
        return None


class NoDrafter(ProposerBase):
    """Flat rows: no drafter at all.

    Alone it proposes nothing worth verifying; under the context lookup
    (`--proposer lookup`) it gives prompt-lookup decoding with exact tree
    verification and no drafter cost, a baseline for what the drafter adds.
    """

    hidden_layers: tuple[int, ...] = ()
    stand_in = False
    depth = 1
    name = "no drafter"

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = int(vocab_size)

    def propose(self, session: TargetSession) -> torch.Tensor:
        return torch.full((1, self.vocab_size), -math.log(self.vocab_size), device=session.device)


class GreedyRolloutProposer(ProposerBase):
    """STAND-IN proposer: the target's own greedy rollout of K steps from the root.

    It spends K extra target forwards, so it is never faster than plain
    decoding; its per-depth rows are the target's distributions along its
    greedy path. Useful as an oracle-style teaching proposer, not a drafter.
    """

    hidden_layers: tuple[int, ...] = ()
    stand_in = True  # shown as such wherever a proposer is named

    def __init__(self, depth: int = 4) -> None:
        if depth < 1:
            raise ValueError(f"rollout depth must be >= 1, got {depth}")
        self.depth = int(depth)
        self.name = f"stand-in: target greedy rollout (K={self.depth})"

    def propose(self, session: TargetSession) -> torch.Tensor:
        rows: list[torch.Tensor] = []

        def measure(s: TargetSession) -> torch.Tensor:
            rows.append(torch.log_softmax(score_root(s).float(), -1))
            return rows[-1]

        committed = len(session.committed)
        walk(session, self.depth, 0.0, make_generator(0, session.device), set(), measure)  # T = 0 draws nothing
        session.rewind(committed)
        return torch.stack(rows)


ROLLOUT_KIND = DrafterKind("rollout", "rollout", "stand-in: the target's own greedy rollout", keyword("rollout"),
                           lambda source, target, options: GreedyRolloutProposer(), ready=("rollout",))
