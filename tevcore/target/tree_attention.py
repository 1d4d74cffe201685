"""SDPA for tree forwards that reads the KV cache once per key/value head.

With grouped-query attention (SmolLM2: 9 query heads share 3 key/value
heads) transformers' SDPA path copies the whole KV cache once per query head
whenever more than one query comes with a mask: `repeat_kv` turns 3 heads
into 9 in every layer of every tree forward, a copy that grows with the
context (`bench --refresh-curve` measures what a tree forward costs). torch's
SDPA takes the grouped heads directly (`enable_gqa`), mask and all: the same
products without the copy. transformers only asks for that where no mask is
given, so this function asks for it where one is, on CPU. On CUDA, by
transformers' own account, grouped heads with a mask fall back to torch's
math kernel (the CUDA-marked tests of tests/target run tree forwards there,
in the GPU proof), so there, as for anything else,
transformers' own SDPA function runs. What SDPA cannot compute (Gemma 2's
attention logit soft-capping) runs in the model family's own eager attention
instead: a slower forward, never a different one. `attention_for` picks
transformers' plain eager implementation up front for models that declare no
SDPA support or soft-cap their attention logits.
"""

from __future__ import annotations

import sys

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

TREE_SDPA = "tevcore_tree_sdpa"


def tree_sdpa_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' SDPA, with grouped heads passed to torch as they are when several queries come with a mask
    on CPU; the family's eager attention where the layer soft-caps its logits."""
    if kwargs.get("softcap") is not None:
        return _family_eager(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    if (query.device.type != "cpu" or getattr(module, "num_key_value_groups", 1) == 1 or query.shape[2] == 1
            or attention_mask is None or kwargs.get("position_bias") is not None):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask[..., : key.shape[-2]], dropout_p=dropout, scale=scaling,
        enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _family_eager(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager attention of the module's own modelling file (soft-capping and all), fed an additive mask."""
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:
        raise RuntimeError(f"{type(module).__name__} needs its eager attention (soft-capping), which its module lacks")
    queries, keys = query.shape[-2], key.shape[-2]
    if attention_mask is None and queries > 1:  # SDPA's is_causal shortcut: spell the causal rule out
        attention_mask = torch.ones(queries, keys, dtype=torch.bool, device=query.device).tril(keys - queries)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        additive = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device)
        attention_mask = additive.masked_fill_(~attention_mask, torch.finfo(query.dtype).min)
    if attention_mask is not None:
        attention_mask = attention_mask[..., :keys]
    return eager(module, query, key, value, attention_mask, **kwargs)


def attention_for(model_class: type, config) -> str:
    """The attention implementation a target loads with: the tree SDPA, or eager where SDPA cannot serve it."""
    soft_capped = getattr(config.get_text_config(decoder=True), "attn_logit_softcapping", None) is not None
    return "eager" if soft_capped or not getattr(model_class, "_supports_sdpa", False) else TREE_SDPA


AttentionInterface.register(TREE_SDPA, tree_sdpa_forward)
AttentionMaskInterface.register(TREE_SDPA, sdpa_mask)
