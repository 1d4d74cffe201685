"""Shared fixtures: a tiny random Llama (fast) and the real default target (loaded once)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SLOW_FIXTURES = {"default_target", "default_proposer"}


def pytest_collection_modifyitems(items):
    """A test that loads the embedded 135M target is slow: the quick lane (-m 'not slow') leaves it out."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if SLOW_FIXTURES & (set(getattr(item, "fixturenames", ())) | {v for v in params.values() if isinstance(v, str)}):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_target():
    """A random-init 2-layer Llama with a 97-token vocabulary and grouped heads, fp32, no tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from tevcore.target.loading import Target
    from tevcore.target.tree_attention import TREE_SDPA

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = LlamaForCausalLM(config).eval()
    model.config._attn_implementation = TREE_SDPA  # what load_target gives a real target
    model.requires_grad_(False)
    return Target(model=model, tokenizer=None, name="tiny-random-llama")


@pytest.fixture(scope="session")
def default_target():
    """The embedded SmolLM2-135M-Instruct in fp32 (converted once, then cached)."""
    from tevcore.target.loading import load_target

    return load_target(dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def default_proposer(default_target):
    """What `--proposer default` gives: the committed drafter with the context lookup."""
    from tevcore.proposers import resolve_proposer

    return resolve_proposer("default", default_target)


@contextmanager
def _single_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread (a thread pool only adds sync cost)."""
    with _single_torch_thread():
        yield


@pytest.fixture(scope="module")
def one_thread_module():
    """One torch thread for a whole module of many small tensor ops (no thrashing on a shared machine)."""
    with _single_torch_thread():
        yield


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory):
    """`tiny_model_folder(family, seed=0, **kw)`: a saved tiny random `family` model (built once per arguments)."""
    from tiny_models import save_tiny_model

    made: dict[tuple, object] = {}

    def build(family: str, seed: int = 0, **kw):
        key = (family, seed, tuple(sorted(kw.items())))
        if key not in made:
            made[key] = save_tiny_model(family, tmp_path_factory.mktemp(f"tiny-{family}-{seed}"), seed=seed, **kw)
        return made[key]

    return build
