"""The shares a simulation's counts give (what the verifier comparison draws beside each law): exits, lengths,
and the bonus tokens at one exit node, each summing to one and agreeing with the raw counts."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builders import best_first
from tevcore.lab.simulate import count_verdicts, simulate


def case() -> tuple:
    generator = torch.Generator().manual_seed(3)
    tree = best_first(2, torch.log_softmax(2.0 * torch.randn(4, 12, generator=generator), -1), 8)
    return tree, torch.randn(tree.num_nodes, 12, generator=generator)


def test_exit_length_and_bonus_shares_match_the_counts():
    tree, logits = case()
    result = simulate("tev", tree, logits, 1.0, 4000, seed=2)
    assert result.exit_shares().sum().item() == pytest.approx(1.0)
    assert torch.equal(result.exit_shares() * 4000, result.exit_counts.double())
    assert result.length_shares().sum().item() == pytest.approx(1.0)
    for node, (tokens, counts) in result.bonus_counts.items():
        shares = result.bonus_shares(node, 12)
        assert shares.shape == (12,) and shares.sum().item() == pytest.approx(1.0)
        assert shares[tokens].tolist() == pytest.approx((counts.double() / counts.sum()).tolist())
        assert shares.count_nonzero().item() == tokens.numel()  # no share on a token never drawn there


def test_bonus_shares_at_a_node_nobody_exited_at_are_none():
    tree, _ = case()
    exits = torch.zeros(5, dtype=torch.long)  # every draw exits at the root
    result = count_verdicts("tev", tree, exits, torch.tensor([4, 4, 7, 4, 1]), temperature=1.0)
    assert result.bonus_shares(1, 12) is None
    assert result.bonus_shares(0, 12)[[1, 4, 7]].tolist() == pytest.approx([0.2, 0.6, 0.2])
