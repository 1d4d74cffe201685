"""A stateful target session: prefill, score a whole draft tree in ONE forward, commit.

The KV cache always holds the committed context except the root (the last
committed token). A tree forward appends the root and every draft node after
the cache; an ancestor-only 4D mask lets each node see the context and its
own ancestors, and its position id is context length + depth, so row v of the
output is exactly p(.|context + path(v)). Committing keeps the accepted
path's cache entries (moved into place) and drops the rest; the bonus token
becomes the next root.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from tevcore.target.kv_cache import concatenating_cache, grow_room, roomy_cache, truncate
from tevcore.target.loading import Target
from tevcore.target.tree_masks import check_tree_masks, tree_masks
from tevcore.engine.tree import DraftTree


@dataclass(frozen=True)
class TreeScores:
    """One tree forward's output: node logits and, on request, hidden states."""

    logits: torch.Tensor  # (N+1, V) float32, row 0 = the root
    hidden: dict[int, torch.Tensor]  # layer index -> (N+1, H) hidden states of the tree's nodes


def one_logit_row(model: torch.nn.Module) -> dict[str, int]:
    """Ask a prefill for its last row of logits only (nothing reads the others), where the model takes the ask."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}


class TargetSession:
    """Committed context + KV cache of one target; scores trees and commits paths."""

    def __init__(self, target: Target, hidden_layers: tuple[int, ...] = (), in_place: bool = True) -> None:
        """`in_place`: new cache entries go into room reserved at prefill (see `kv_cache`); False keeps
        transformers' concatenating cache, whose earlier views stay valid for a caller that rewinds to them."""
        self.target = target
        self.in_place = in_place
        self.model = target.model
        self._windows = check_tree_masks(self.model)  # layer type -> window; refuses what it cannot mask
        self._prefill_kwargs = one_logit_row(self.model)
        self.hidden_layers = tuple(hidden_layers)
        self.cache: DynamicCache | None = None
        self.committed: list[int] = []
        self._hidden: dict[int, torch.Tensor] = {}  # layer -> (capacity, H) buffer; rows < _hidden_length are cached
        self._hidden_length = 0
        self._last_tree: DraftTree | None = None
        self._last_hidden: dict[int, torch.Tensor] = {}

    @property
    def device(self) -> torch.device:
        return self.target.device

    @property
    def root_token(self) -> int:
        return self.committed[-1]

    @property
    def context_hidden(self) -> dict[int, torch.Tensor]:
        """layer -> (S, H) hidden states of the cached positions (views of preallocated buffers)."""
        return {layer: buffer[:self._hidden_length] for layer, buffer in self._hidden.items()}

    @property
    def cached_length(self) -> int:
        """Tokens in the KV cache: everything committed except the root."""
        return len(self.committed) - 1

    def prefill(self, token_ids: list[int], reserve: int = 0) -> None:
        """Start from a prompt: cache all but its last token, which becomes the root.

        `reserve` is how many more positions the caller will need (tree and
        new tokens); a prompt that does not leave room raises a ValueError.
        """
        if not token_ids:
            raise ValueError("the prompt has no tokens")
        limit = self.target.max_context
        if len(token_ids) + reserve > limit:
            raise ValueError(
                f"the prompt has {len(token_ids)} tokens; with {reserve} more positions it exceeds the "
                f"model's context of {limit} tokens"
            )
        self.committed = [int(t) for t in token_ids]
        self.cache = (roomy_cache(self.model.config, len(token_ids) + reserve) if self.in_place
                      else concatenating_cache(self.model.config))
        hidden_size = int(self.model.config.hidden_size)
        # room for the whole decode: a commit writes its rows in place instead of copying the history
        self._hidden = {layer: torch.empty(len(token_ids) + reserve, hidden_size, device=self.device)
                        for layer in self.hidden_layers}
        self._hidden_length = 0
        self._last_tree = None
        if len(token_ids) > 1:
            ids = torch.tensor([token_ids[:-1]], device=self.device)
            with torch.inference_mode():
                out = self.model(input_ids=ids, cache=self.cache, use_cache=True, **self._prefill_kwargs,
                                 output_hidden_states=bool(self.hidden_layers))
            self._append_hidden({layer: out.hidden_states[layer][0] for layer in self.hidden_layers})

    def score_tree(self, tree: DraftTree) -> TreeScores:
        """Target logits of every node of `tree` in one forward over the cache."""
        if self.cache is None:
            raise RuntimeError("call prefill() before scoring a tree")
        if int(tree.tokens[0]) != self.root_token:
            raise ValueError(f"the tree's root token {int(tree.tokens[0])} is not the committed root {self.root_token}")
        start = self.cached_length
        if start + tree.max_depth + 1 > self.target.max_context:
            raise ValueError(f"the tree reaches position {start + tree.max_depth}, past the model's context")
        ids = tree.tokens.to(self.device).unsqueeze(0)
        positions = (start + tree.depths).to(self.device).unsqueeze(0)
        mask = tree_masks(self._windows, tree, start, self.model.dtype, self.device)
        with torch.inference_mode():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                             cache=self.cache, use_cache=True,
                             output_hidden_states=bool(self.hidden_layers))
        hidden = {layer: out.hidden_states[layer][0].float() for layer in self.hidden_layers}
        self._last_tree, self._last_hidden = tree, hidden
        return TreeScores(logits=out.logits[0].float(), hidden=hidden)

    @torch.inference_mode()
    def commit(self, path: list[int], bonus_token: int) -> None:
        """Keep the accepted path (root first) in the cache; the bonus becomes the new root.

        Must follow the `score_tree` call of the tree the path belongs to.
        """
        tree = self._last_tree
        if tree is None:
            raise RuntimeError("commit() needs a scored tree: call score_tree() first")
        if not path or path[0] != 0 or tree.path(path[-1]) != list(path):
            raise ValueError(f"{path} is not a root path of the scored tree")
        start = self.cached_length
        if path != list(range(len(path))):  # a path of the first nodes is in place already
            keep = torch.tensor(path, device=self.device) + start
            for layer in self.cache.layers:  # move the kept entries into place, then cut
                layer.keys[..., start:start + len(path), :] = layer.keys.index_select(-2, keep)
                layer.values[..., start:start + len(path), :] = layer.values.index_select(-2, keep)
        truncate(self.cache, start + len(path))
        index = torch.tensor(path, device=self.device)
        self._append_hidden({layer: states.index_select(0, index) for layer, states in self._last_hidden.items()})
        self.committed.extend(int(t) for t in tree.tokens[path[1:]].tolist())
        self.committed.append(int(bonus_token))
        self._last_tree = None

    def _append_hidden(self, rows: dict[int, torch.Tensor]) -> None:
        """Write newly cached positions' hidden states after the cached ones (growing a buffer if a caller
        commits past its reserve)."""
        if not rows:
            return
        start = self._hidden_length
        end = start + next(iter(rows.values())).shape[0]
        for layer, states in rows.items():
            if end > self._hidden[layer].shape[0]:
                self._hidden[layer] = grow_room(self._hidden[layer], start, end)
            self._hidden[layer][start:end] = states
        self._hidden_length = end

    @torch.inference_mode()
    def rollback(self) -> None:
        """Drop a scored tree from the cache without committing anything (a dry look)."""
        if self._last_tree is not None:
            truncate(self.cache, self.cached_length)
            self._last_tree = None

    def rewind(self, length: int) -> None:
        """Forget every commit after the first `length` committed tokens (a lookahead that must not stay)."""
        if not 1 <= length <= len(self.committed):
            raise ValueError(f"cannot rewind to {length} tokens: {len(self.committed)} are committed")
        self.rollback()
        self.committed = self.committed[:length]
        truncate(self.cache, length - 1)
        self._hidden_length = min(self._hidden_length, length - 1)
