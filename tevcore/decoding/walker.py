"""The one autoregressive walker: draw a token from the root's row, commit it, repeat.

It knows nothing of proposers or verification, so the decode loop's AR
baseline, the drafter evaluation, tree collection and the greedy-rollout
stand-in proposer can all import it.
"""

from __future__ import annotations

from typing import Callable

import torch

from tevcore.engine.sampling import draw_token
from tevcore.engine.tree import DraftTree
from tevcore.target.session import TargetSession

RootRow = Callable[[TargetSession], torch.Tensor]


def score_root(session: TargetSession) -> torch.Tensor:
    """The plain autoregressive step: score the root alone, return its row of logits."""
    return session.score_tree(DraftTree.root_only(session.root_token)).logits[0]


def walk(session: TargetSession, max_new_tokens: int, temperature: float, generator: torch.Generator,
         stops: set[int], measure: RootRow = score_root) -> list[int]:
    """The one autoregressive walker: per position `measure` scores (and leaves in place) a tree and returns
    its root row, one token is drawn from it, and it is committed unless it is a stop token.

    The AR baseline, the drafter evaluation, tree collection for bench-verifiers
    and the greedy-rollout stand-in all walk this loop, so they cannot differ
    in sampling or stopping.
    """
    tokens: list[int] = []
    while len(tokens) < max_new_tokens:
        token = int(draw_token(measure(session), temperature, generator))
        tokens.append(token)
        if token in stops:
            break
        session.commit([0], token)
    return tokens
