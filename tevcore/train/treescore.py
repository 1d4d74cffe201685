"""Scoring draft trees at training anchors with the frozen target, reusing `TargetSession`.

Prefilling a long context per anchor would dominate ExitTrain's cost, so a
pool of sequences is prefilled ONCE; the full KV cache is kept, and a tree at
position t reuses a view of its first t entries. The tree forward itself is
`TargetSession.score_tree` (same ancestor mask, same positions as inference).
"""

from __future__ import annotations

import torch

from tevcore.target.loading import Target
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree


class PooledContexts:
    """Target sessions over whole sequences; `score(key, t, tree)` scores a tree rooted at position t."""

    def __init__(self, target: Target, sequences: dict[tuple[int, int], list[int]]) -> None:
        self.target = target
        self.sequences = sequences
        self.sessions: dict[tuple[int, int], TargetSession] = {}
        self.snapshots: dict[tuple[int, int], list[tuple[torch.Tensor, torch.Tensor]]] = {}
        for key, ids in sequences.items():
            session = TargetSession(target, in_place=False)  # trees must not overwrite the kept cache
            session.prefill(ids)
            self.sessions[key] = session
            self.snapshots[key] = [(layer.keys, layer.values) for layer in session.cache.layers]

    def score(self, key: tuple[int, int], position: int, tree: DraftTree) -> torch.Tensor:
        """(N+1, V) target logits of `tree` whose root is token `position` of the sequence."""
        ids = self.sequences[key]
        if not 1 <= position < len(ids):
            raise ValueError(f"anchor position {position} outside the sequence (length {len(ids)})")
        session = self.sessions[key]
        for layer, (keys, values) in zip(session.cache.layers, self.snapshots[key]):
            layer.keys, layer.values = keys[..., :position, :], values[..., :position, :]
        session.committed = list(ids[:position + 1])  # cache = everything before the root
        logits = session.score_tree(tree).logits
        session.rollback()
        for layer, (keys, values) in zip(session.cache.layers, self.snapshots[key]):
            layer.keys, layer.values = keys, values  # drop the grown copy: a kept one would double the pool's memory
        return logits
