"""Tree masks per attention-layer type: the ancestor-only rule AND each layer's own window.

A node at depth d sits at position start + d; it may see a cached context
position k and a tree node j only where j is itself or an ancestor, and, in
a sliding-window layer of window W, only keys whose position is within W of
its own (query position - key position < W, transformers' rule). The session
keeps every key in every layer (see kv_cache), so column c of a mask is key c
of the cache in every layer. Models whose layers are all of one type get one
mask; models that mix full and sliding layers (Gemma 2/3, Qwen2/3 with a
window) get transformers' dict of masks per layer type, which their forward
takes as it is.
"""

from __future__ import annotations

import inspect
import re
from functools import lru_cache

import torch
from transformers.cache_utils import get_layer_types_and_kwargs

from tevcore.engine.tree import DraftTree

SUPPORTED_LAYER_TYPES = ("full_attention", "sliding_attention")
_TAKES_MASK_DICT = re.compile(r"isinstance\(\s*(\w+\s*:=\s*)?attention_mask\s*,\s*dict\s*\)")


def layer_windows(config) -> dict[str, int | None]:
    """Layer type -> sliding window (None: full attention) of every type the model's layers use.

    A ValueError for layer types the tree forward cannot mask exactly (chunked,
    linear or shared-cache layers).
    """
    text_config = config.get_text_config(decoder=True)
    types, kwargs = get_layer_types_and_kwargs(text_config)
    unsupported = sorted(set(types) - set(SUPPORTED_LAYER_TYPES))
    if unsupported:
        raise ValueError(f"{getattr(config, 'model_type', 'this model')} has {', '.join(unsupported)} layers; the tree "
                         f"forward supports {' and '.join(SUPPORTED_LAYER_TYPES)} layers only")
    windows = {}
    for kind, extra in zip(types, kwargs):
        window = extra.get("sliding_window") if kind == "sliding_attention" else None
        if kind == "sliding_attention" and not window:
            raise ValueError(f"{getattr(config, 'model_type', 'this model')} has sliding layers without a window size")
        windows[kind] = None if window is None else int(window)
    return windows


def takes_mask_per_layer_type(model: torch.nn.Module) -> bool:
    """Whether the model's forward accepts a dict {layer type: mask} (transformers' hybrid-model convention)."""
    return _forward_takes_mask_dict(type(getattr(model, "base_model", model)))


@lru_cache(maxsize=None)
def _forward_takes_mask_dict(model_class: type) -> bool:
    try:
        return bool(_TAKES_MASK_DICT.search(inspect.getsource(model_class.forward)))
    except (OSError, TypeError):
        return False


def check_tree_masks(model: torch.nn.Module) -> dict[str, int | None]:
    """The model's layer windows, or a ValueError when its masks cannot be given per layer type."""
    windows = layer_windows(model.config)
    if len(windows) > 1 and not takes_mask_per_layer_type(model):
        raise ValueError(f"{type(model).__name__} mixes {' and '.join(windows)} layers but takes no mask per layer "
                         "type: its tree forward cannot be masked exactly")
    return windows


def _allowed(tree: DraftTree, start: int, window: int | None) -> torch.Tensor:
    """(N+1, start+N+1) bool: which cache keys each tree node may attend to."""
    n = tree.num_nodes
    allowed = torch.ones(n, start + n, dtype=torch.bool)
    allowed[:, start:] = tree.ancestor_mask()
    if window is not None:
        query_pos = start + tree.depths
        key_pos = torch.cat([torch.arange(start), start + tree.depths])
        allowed &= (query_pos[:, None] - key_pos[None, :]) < window
    return allowed


def tree_masks(windows: dict[str, int | None], tree: DraftTree, start: int, dtype: torch.dtype,
               device: torch.device) -> torch.Tensor | dict[str, torch.Tensor]:
    """Additive 4D masks (1, 1, N+1, start+N+1): one tensor for a single layer type, else a dict per type."""
    masks = {kind: additive_mask(_allowed(tree, start, window), dtype, device) for kind, window in windows.items()}
    return next(iter(masks.values())) if len(masks) == 1 else masks


def frontier_mask(context: int, keys: int, seen: list[list[int]], dtype: torch.dtype,
                  device: torch.device) -> torch.Tensor:
    """Additive 4D mask (1, 1, F, keys) of a tree grown one depth per forward (a draft LM's frontier).

    Query f sees the first `context` keys (the committed context) and the key
    columns `seen[f]`: its own and its ancestors' entries, which earlier
    depths left in the cache in the order they were fed. No window applies:
    such a cache keeps every key, and a draft's rows only steer the tree,
    whose verification stays exact.
    """
    allowed = torch.zeros(len(seen), keys, dtype=torch.bool)
    allowed[:, :context] = True
    for row, columns in enumerate(seen):
        allowed[row, columns] = True
    return additive_mask(allowed, dtype, device)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(1, 1, R, C) mask of 0 where `allowed`, else the dtype's lowest value (what attention adds to scores)."""
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask.to(device)[None, None]
