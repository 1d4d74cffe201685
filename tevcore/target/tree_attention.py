"""SDPA for tree forwards that reads the KV cache once per key/value head.

With grouped-query attention (SmolLM2: 9 query heads share 3 key/value
heads) transformers' SDPA path copies the whole KV cache once per query head
whenever more than one query comes with a mask: `repeat_kv` turns 3 heads
into 9 in every layer of every tree forward. On a CPU that copy is ~1.5 ms of
a 6-node forward at a 150-token context, and grows with the context. torch's
SDPA takes the grouped heads directly (`enable_gqa`), mask and all: the same
products without the copy. transformers only asks for that where no mask is
given, so this function asks for it where one is, on CPU. On CUDA, by
transformers' own account, grouped heads with a mask fall back to torch's
math kernel (untested here: no GPU), so there, as for anything else,
transformers' own SDPA function runs.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

TREE_SDPA = "tevcore_tree_sdpa"


def tree_sdpa_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' SDPA, with grouped heads passed to torch as they are when several queries come with a mask
    on CPU."""
    if (query.device.type != "cpu" or getattr(module, "num_key_value_groups", 1) == 1 or query.shape[2] == 1
            or attention_mask is None or kwargs.get("position_bias") is not None):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask[..., : key.shape[-2]], dropout_p=dropout, scale=scaling,
        enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(TREE_SDPA, tree_sdpa_forward)
AttentionMaskInterface.register(TREE_SDPA, sdpa_mask)
