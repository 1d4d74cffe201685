"""Drafter evaluation runs the real decoding loop and reports E = 1 + C beside the measured block length."""

from __future__ import annotations

import pytest
import torch

from tevcore.datasets import Prompt
from tevcore.drafters.block import BlockDrafter, BlockDrafterConfig, BlockProposer
from tevcore.train.eval import eval_prompts, evaluate, format_table


def test_evaluate_reports_one_cell_per_budget(tiny_target):
    config = BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=97,
                                hidden_layers=(1, 2), context=4, depth=3, layers=1, heads=4, ffn=64)
    torch.manual_seed(0)
    proposer = BlockProposer(BlockDrafter(config, torch.arange(97)).attach(tiny_target))
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    cells = evaluate(tiny_target, proposer, prompts, 1.0, budgets=("chain", 4), max_new_tokens=8, progress=False)
    assert [c.budget for c in cells] == ["chain", "4"]
    for cell in cells:
        assert cell.prompts == 2 and cell.rounds >= 2
        assert 1.0 <= cell.expected_length <= 1 + 4 and 1.0 <= cell.block_length <= 1 + 4
    assert "E=1+C" in format_table(cells)


def test_eval_prompts_interleave_held_out_sets():
    prompts = eval_prompts(("humaneval", "gsm8k"), 2)
    assert len(prompts) == 4 and "Python function" in prompts[0].text
    assert [p.dataset for p in prompts] == ["humaneval", "gsm8k", "humaneval", "gsm8k"]


def test_evaluate_by_set_splits_the_same_rounds(tiny_target):
    config = BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=97,
                                hidden_layers=(1, 2), context=4, depth=3, layers=1, heads=4, ffn=64)
    torch.manual_seed(0)
    proposer = BlockProposer(BlockDrafter(config, torch.arange(97)).attach(tiny_target))
    prompts = [Prompt("a", "1", "five six"), Prompt("b", "2", "nine ten eleven"), Prompt("a", "3", "seven")]
    ids = {p.text: [5 + len(p.text) % 7, 6, 7] for p in prompts}  # the tiny target has no tokenizer
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tevcore.train.eval.prompt_ids", lambda target, text: ids[text])
        cells = evaluate(tiny_target, proposer, prompts, 1.0, budgets=(4,), max_new_tokens=6,
                         progress=False, by_set=True)
    assert [(c.prompt_set, c.prompts) for c in cells] == [("all", 3), ("a", 2), ("b", 1)]
    whole, parts = cells[0], cells[1:]
    assert whole.rounds == sum(c.rounds for c in parts)
    for field in ("expected_length", "block_length"):
        pooled = sum(getattr(c, field) * c.rounds for c in parts) / whole.rounds
        assert pooled == pytest.approx(getattr(whole, field))


def test_oracle_ceilings_grow_with_the_budget_and_are_exact_at_t0(tiny_target):
    from tevcore.train.eval import oracle_ceilings

    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    greedy = oracle_ceilings(tiny_target, prompts, 0.0, [2, 4], max_new_tokens=3, progress=False)
    assert [c.expected_length for c in greedy] == [3.0, 5.0]  # the greedy chain always covers all
    sampled = oracle_ceilings(tiny_target, prompts, 1.0, [1, 2, 4], max_new_tokens=3, progress=False)
    assert [c.budget for c in sampled] == ["oracle 1", "oracle 2", "oracle 4"]
    values = [c.expected_length for c in sampled]
    assert 1.0 < values[0] < values[1] < values[2] < 5.0
    assert all(c.rounds == 6 for c in sampled)
