"""The grouped-head SDPA of tree forwards against transformers' own SDPA (which copies K/V per head)."""

from types import SimpleNamespace

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from tevcore.target.tree_attention import tree_sdpa_forward

HEADS, GROUPS, DIM, CONTEXT = 6, 3, 8, 11


def _inputs(queries: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(1, HEADS, queries, DIM, generator=generator)
    key, value = (torch.randn(1, HEADS // GROUPS, CONTEXT + queries, DIM, generator=generator) for _ in range(2))
    allowed = torch.ones(queries, CONTEXT + queries, dtype=torch.bool)
    allowed[:, CONTEXT:] = torch.rand(queries, queries, generator=generator) < 0.5
    allowed[:, CONTEXT:].fill_diagonal_(True)
    mask = torch.zeros(1, 1, queries, CONTEXT + queries).masked_fill(~allowed, torch.finfo(torch.float32).min)
    return query, key, value, mask


@pytest.mark.parametrize("queries", [1, 5])
def test_masked_tree_attention_equals_transformers_sdpa(queries):
    module = SimpleNamespace(num_key_value_groups=GROUPS, is_causal=True)
    query, key, value, mask = _inputs(queries)
    ours, _ = tree_sdpa_forward(module, query, key, value, mask, scaling=DIM ** -0.5)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=DIM ** -0.5)
    assert ours.shape == (1, queries, HEADS, DIM)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)


def test_a_mask_longer_than_the_keys_is_cut_to_them():
    module = SimpleNamespace(num_key_value_groups=GROUPS, is_causal=True)
    query, key, value, mask = _inputs(4, seed=1)
    padded = torch.cat([mask, torch.zeros(1, 1, 4, 3)], -1)  # a mask buffer with room to spare
    ours, _ = tree_sdpa_forward(module, query, key, value, padded)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
