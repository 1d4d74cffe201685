"""The one autoregressive walker: draw a token from each sequence's next row, commit it, repeat.

It knows nothing of proposers or verification, so the decode loop's AR
baseline, the drafter evaluation, tree collection, the greedy-rollout
stand-in proposer and the training data's batched generation all walk it,
and cannot differ in sampling or stopping.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from tevcore.engine.sampling import draw_token
from tevcore.engine.tree import DraftTree
from tevcore.target.session import TargetSession

RootRow = Callable[[TargetSession], torch.Tensor]


class Walkable(Protocol):
    """Sequences walked side by side: their next-token rows, and the tokens that extend them."""

    def next_rows(self) -> torch.Tensor:
        """(n, V) logits of the next token of every sequence (rows of finished ones are ignored)."""
        ...

    def extend(self, tokens: dict[int, int], stopped: dict[int, int]) -> None:
        """Commit `tokens[i]` to sequence i; `stopped[j]` is the stop token that ended sequence j (a session
        drops it, a batch recording training features forwards it). Finished sequences are not named."""
        ...


def walk_all(sequences: Walkable, max_new_tokens: int, temperatures: list[float], generator: torch.Generator,
             stops: set[int]) -> list[list[int]]:
    """Per sequence, up to `max_new_tokens` tokens, each drawn at its temperature from its next row; a stop
    token ends its sequence and is not committed. Returns every sequence's drawn tokens."""
    drawn: list[list[int]] = [[] for _ in temperatures]
    live = [i for i in range(len(temperatures)) if max_new_tokens > 0]
    while live:
        rows = sequences.next_rows()
        for i in live:
            drawn[i].append(int(draw_token(rows[i], temperatures[i], generator)))
        going = {i: drawn[i][-1] for i in live if drawn[i][-1] not in stops}
        sequences.extend(going, {i: drawn[i][-1] for i in live if i not in going})
        live = [i for i in going if len(drawn[i]) < max_new_tokens]
    return drawn


def score_root(session: TargetSession) -> torch.Tensor:
    """The plain autoregressive step: score the root alone, return its row of logits."""
    return session.score_tree(DraftTree.root_only(session.root_token)).logits[0]


class _OneSession:
    """A target session as a single walked sequence; `measure` scores (and leaves in place) its tree."""

    def __init__(self, session: TargetSession, measure: RootRow) -> None:
        self.session, self.measure = session, measure

    def next_rows(self) -> torch.Tensor:
        return self.measure(self.session).unsqueeze(0)

    def extend(self, tokens: dict[int, int], stopped: dict[int, int]) -> None:
        if tokens:
            self.session.commit([0], tokens[0])


def walk(session: TargetSession, max_new_tokens: int, temperature: float, generator: torch.Generator,
         stops: set[int], measure: RootRow = score_root) -> list[int]:
    """`walk_all` over one target session: per position `measure` scores a tree and returns its root row,
    one token is drawn from it, and it is committed unless it is a stop token."""
    return walk_all(_OneSession(session, measure), max_new_tokens, [temperature], generator, stops)[0]
