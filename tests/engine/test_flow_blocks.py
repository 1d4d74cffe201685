"""The flow's float64 rows in bounded blocks: the same flow, whatever the block size."""

import pytest
import torch

from tevcore.engine import flow as flow_module
from tevcore.engine.builders import best_first


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_flow_is_the_same_in_blocks_of_any_size(temperature, monkeypatch):
    vocab = 300
    generator = torch.Generator().manual_seed(4)
    tree = best_first(0, torch.log_softmax(2 * torch.randn(4, vocab, generator=generator), -1), 12)
    logits = 3 * torch.randn(tree.num_nodes, vocab, generator=generator)
    whole = flow_module.target_flow(tree, logits, temperature)
    monkeypatch.setattr(flow_module, "FLOAT64_SCRATCH_ELEMENTS", 2 * vocab + 1)  # two rows per block
    blocks = flow_module.target_flow(tree, logits, temperature)
    for name in ("edge_prob", "path_prob", "child_mass", "exit_mass", "missing_tokens", "missing_probs"):
        assert torch.equal(getattr(whole, name), getattr(blocks, name)), name
    assert float(blocks.exit_mass.sum()) == pytest.approx(1.0, abs=1e-12)
