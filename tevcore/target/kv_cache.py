"""The KV caches of a target session and of a draft LM: room reserved up front, every key kept.

transformers' `DynamicCache` grows each layer by concatenation, so every
forward copies the whole cache, a cost that grows with the context and
falls on every one-token forward of a long decode. A
session knows how long its decode can get, so its
layers keep one buffer each with that much room; a forward writes its new
keys and values in place and attention reads views of the filled part. A
decode that runs past the room grows the buffer (one copy, doubling).

Every layer keeps every key, sliding-window layers included: transformers'
sliding layers keep only the last W keys, which no longer line up with a tree
mask over the whole context. The window is the mask's job (see tree_masks).
Both caches here therefore keep every key; they differ only in where new
entries go. A cache is cut back (a dropped tree, a rewind) by `truncate`,
which shortens views and copies nothing.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class RoomyLayer(DynamicLayer):
    """A `DynamicLayer` whose `keys` and `values` are views of preallocated buffers.

    Shortening the views (as `TargetSession` does to drop a tree) frees the
    room behind them for the next forward.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = int(capacity)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self._key_room = key_states.new_empty(*key_states.shape[:-2], self.capacity, key_states.shape[-1])
        self._value_room = value_states.new_empty(*value_states.shape[:-2], self.capacity, value_states.shape[-1])
        self.keys, self.values = self._key_room[..., :0, :], self._value_room[..., :0, :]
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.keys.shape[-2]
        end = start + key_states.shape[-2]
        if end > self._key_room.shape[-2]:
            self._key_room = grow_room(self._key_room, start, end)
            self._value_room = grow_room(self._value_room, start, end)
        self._key_room[..., start:end, :] = key_states
        self._value_room[..., start:end, :] = value_states
        self.keys, self.values = self._key_room[..., :end, :], self._value_room[..., :end, :]
        return self.keys, self.values


def grow_room(room: torch.Tensor, filled: int, needed: int) -> torch.Tensor:
    """A copy of `room` (positions on axis -2) with room for `needed` positions, at least double; the first
    `filled` kept."""
    grown = room.new_empty(*room.shape[:-2], max(needed, 2 * room.shape[-2]), room.shape[-1])
    grown[..., :filled, :] = room[..., :filled, :]
    return grown


def roomy_cache(config, capacity: int) -> DynamicCache:
    """A `DynamicCache` for `config` keeping every key of every layer in place, each layer reserving `capacity`
    positions (growing past them)."""
    cache = DynamicCache(config=config)
    cache.layers = [RoomyLayer(capacity) for _ in cache.layers]
    return cache


def concatenating_cache(config) -> DynamicCache:
    """A `DynamicCache` for `config` keeping every key of every layer by concatenation: each forward makes new
    tensors, so views taken before it stay valid (for a caller that rewinds to them)."""
    cache = DynamicCache(config=config)
    cache.layers = [DynamicLayer() for _ in cache.layers]
    return cache


def truncate(cache: DynamicCache, length: int) -> None:
    """Keep the first `length` positions of every layer (views: no copy; a layer not yet written is left)."""
    for layer in cache.layers:
        if layer.is_initialized:
            layer.keys, layer.values = layer.keys[..., :length, :], layer.values[..., :length, :]
