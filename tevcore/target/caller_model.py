"""A causal LM the caller already loaded, as a target: the door `model.generate(custom_generate=...)` comes in by.

`loading` loads targets by name and prepares them for speed; a caller's model
is taken as it is, so tree decoding runs the very attention, weights and
device the caller's own `generate` would.
"""

from __future__ import annotations

import torch

from tevcore.target.loading import Target
from tevcore.target.tree_masks import check_tree_masks


def loaded_target(model: torch.nn.Module, tokenizer=None, name: str | None = None) -> Target:
    """A causal LM the caller already loaded (the model behind `model.generate`) as a target, taken as it is.

    Its weights, device, dtype and attention implementation stay the
    caller's: nothing is packed or converted, so a tree forward runs the very
    attention the caller's own `generate` runs (`load_target` instead picks
    the tree SDPA and packs CPU linears, for speed). It must be a causal LM
    whose layers the tree masks can serve; anything else is a one-line
    ValueError.
    """
    label = name or type(model).__name__
    if not isinstance(model, torch.nn.Module) or getattr(model, "config", None) is None:
        raise ValueError(f"{label} is not a transformers model (no config)")
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(f"{label} is an encoder-decoder model; tree decoding needs a decoder-only causal LM")
    if model.get_output_embeddings() is None:
        raise ValueError(f"{label} has no language-model head; tree decoding needs a causal LM")
    check_tree_masks(model)
    return Target(model=model, tokenizer=tokenizer, name=label)
