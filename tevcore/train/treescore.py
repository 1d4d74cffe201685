"""Scoring draft trees at training anchors with the frozen target, reusing `TargetSession`.

Prefilling a long context per anchor would dominate ExitTrain's cost, so a
pool of sequences is prefilled ONCE; the full KV cache is kept, and a tree at
position t reuses a view of its first t entries. The tree forward itself is
`TargetSession.score_tree` (same ancestor mask, same positions as inference).

A step's trees are scored together (`score_many`): one forward over a batch
whose row b holds anchor b's cached context (padding after it, masked out)
and its tree (each node sees its context and its ancestors, at position
context + depth, as `tree_masks` lays out for one tree). On a CPU a forward
of 8 trees of 33 nodes costs far less than 8 forwards of one, since the
linear layers then run on a matrix of 264 rows instead of 33.
"""

from __future__ import annotations

import torch

from tevcore.engine.tree import DraftTree
from tevcore.target.kv_cache import concatenating_cache
from tevcore.target.loading import Target
from tevcore.target.session import TargetSession
from tevcore.target.tree_masks import tree_masks


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

    def score_many(self, items: list[tuple[tuple[int, int], int, DraftTree]]) -> list[torch.Tensor]:
        """`score(key, position, tree)` of every item, in one batched forward (a model with sliding-window or
        mixed layer types is scored one tree at a time)."""
        sessions = [self.sessions[key] for key, _, _ in items]
        if len(items) < 2 or list(sessions[0]._windows.values()) != [None]:
            return [self.score(*item) for item in items]
        for key, position, _ in items:
            if not 1 <= position < len(self.sequences[key]):
                raise ValueError(f"anchor position {position} outside the sequence (length {len(self.sequences[key])})")
        model, device = self.target.model, self.target.device
        width = max(position for _, position, _ in items)  # cached context slots: the tokens before each root
        nodes = max(tree.num_nodes for _, _, tree in items)
        lowest = torch.finfo(model.dtype).min
        ids = torch.zeros(len(items), nodes, dtype=torch.long)
        positions = torch.zeros(len(items), nodes, dtype=torch.long)
        mask = torch.full((len(items), 1, nodes, width + nodes), lowest, dtype=model.dtype)
        for b, (key, position, tree) in enumerate(items):
            n = tree.num_nodes
            ids[b, :n], positions[b, :n], positions[b, n:] = tree.tokens, position + tree.depths, position
            single = tree_masks(sessions[b]._windows, tree, position, model.dtype, torch.device("cpu"))[0, 0]
            mask[b, 0, :n, :position] = single[:, :position]
            mask[b, 0, :n, width:width + n] = single[:, position:]
            mask[b, 0, range(n, nodes), range(width + n, width + nodes)] = 0.0  # padding rows see themselves
        cache = concatenating_cache(model.config)
        for index, layer in enumerate(self.snapshots[items[0][0]]):
            keys = layer[0].new_zeros(len(items), layer[0].shape[1], width, layer[0].shape[-1])
            values = torch.zeros_like(keys)
            for b, (key, position, _) in enumerate(items):
                kept_keys, kept_values = self.snapshots[key][index]
                keys[b, :, :position], values[b, :, :position] = kept_keys[0, :, :position], kept_values[0, :, :position]
            cache.update(keys, values, index)
        with torch.inference_mode():
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                        cache=cache, use_cache=True)
        return [out.logits[b, :tree.num_nodes].float() for b, (_, _, tree) in enumerate(items)]
