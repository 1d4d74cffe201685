"""A random-weight target built from a config (the GPU proof's models) is a target like a loaded one."""

from __future__ import annotations

import torch
from transformers import Qwen3Config

from tevcore.decoding.autobudget import random_context, star_tree
from tevcore.target.loading import random_target
from tevcore.target.session import TargetSession
from tevcore.target.tree_attention import TREE_SDPA


def test_a_random_target_takes_the_tree_attention_and_its_tree_forward_equals_a_recompute(one_thread):
    config = Qwen3Config(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128)
    target = random_target(config, "tiny random qwen3", device="cpu", dtype="float32", seed=3)
    assert target.model.config._attn_implementation == TREE_SDPA and target.tokenizer is None
    assert target.vocab_size == 96 and not any(p.requires_grad for p in target.model.parameters())
    context = random_context(target, 12)
    session = TargetSession(target)
    session.prefill(context, reserve=8)
    tree = star_tree(session.root_token, 4)
    logits = session.score_tree(tree).logits
    with torch.inference_mode():
        for node in range(tree.num_nodes):
            path = context + tree.tokens[tree.path(node)[1:]].tolist()
            expected = target.model(input_ids=torch.tensor([path])).logits[0, -1]
            assert torch.allclose(logits[node], expected, atol=1e-4)
    again = random_target(config, "tiny random qwen3", device="cpu", dtype="float32", seed=3)
    assert torch.equal(again.model.get_output_embeddings().weight, target.model.get_output_embeddings().weight)


def test_making_a_random_target_leaves_the_callers_random_state_as_it_was():
    config = Qwen3Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=32)
    torch.manual_seed(123)  # the test's own state, as a caller of the package would set it
    before = torch.random.get_rng_state()
    first = random_target(config, "tiny", device="cpu", dtype="float32", seed=5)
    assert torch.equal(torch.random.get_rng_state(), before)
    second = random_target(config, "tiny", device="cpu", dtype="float32", seed=6)
    assert not torch.equal(first.model.get_output_embeddings().weight, second.model.get_output_embeddings().weight)
