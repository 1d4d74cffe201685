"""Drafter evaluation runs the real decoding loop and reports E = 1 + C beside the measured block length."""

from __future__ import annotations

import math

import pytest
import torch

from tevcore.lab.datasets import Prompt
from tevcore.proposers.block import BlockDrafter, BlockDrafterConfig, BlockProposer
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
        assert 1.0 <= cell.expected_length <= 1 + 4 and 1.0 <= cell.mean_emitted <= 1 + 4
        assert 0.0 <= cell.expected_length_se < 4  # two prompts: a finite spread of E between them
        counts = cell.spec_decode  # the engines' counts of the same rounds: L - 1 accepted per draft on average
        assert counts["num_drafts"] == cell.rounds
        assert counts["mean_acceptance_length"] == pytest.approx(cell.mean_emitted, abs=1e-9)
    assert "E=1+C" in format_table(cells) and f"({cells[0].expected_length_se:.3f})" in format_table(cells)


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
    assert math.isnan(parts[1].expected_length_se) and not math.isnan(whole.expected_length_se)  # one prompt: none
    for field in ("expected_length", "mean_emitted"):
        pooled = sum(getattr(c, field) * c.rounds for c in parts) / whole.rounds
        assert pooled == pytest.approx(getattr(whole, field))


def test_oracle_ceilings_grow_with_the_budget_and_are_exact_at_t0(tiny_target):
    from tevcore.train.eval import oracle_ceilings

    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    greedy = oracle_ceilings(tiny_target, prompts, 0.0, [2, 4], max_new_tokens=3, progress=False)
    assert [c.expected_length for c in greedy] == [3.0, 5.0]  # the greedy chain always covers all
    assert [c.expected_length_se for c in greedy] == [0.0, 0.0]  # the same at every position of both prompts
    sampled = oracle_ceilings(tiny_target, prompts, 1.0, [1, 2, 4], max_new_tokens=3, progress=False)
    assert [c.budget for c in sampled] == ["oracle 1", "oracle 2", "oracle 4"]
    values = [c.expected_length for c in sampled]
    assert 1.0 < values[0] < values[1] < values[2] < 5.0
    assert all(c.rounds == 6 for c in sampled)


def _tiny_proposer(target, seed: int) -> BlockProposer:
    config = BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=97,
                                hidden_layers=(1, 2), context=4, depth=3, layers=1, heads=4, ffn=64)
    torch.manual_seed(seed)
    drafter = BlockDrafter(config, torch.arange(97)).attach(target)
    with torch.no_grad():
        drafter.bias.normal_(std=3.0)
    return BlockProposer(drafter, name=f"seed {seed}", dtype=torch.float32)


def test_a_proposer_paired_with_itself_differs_by_exactly_nothing(tiny_target):
    from tevcore.train.eval import paired_coverage

    a, b = _tiny_proposer(tiny_target, 1), _tiny_proposer(tiny_target, 1)
    cells = paired_coverage(tiny_target, a, b, [[5, 6, 7, 8], [9, 10, 11]], 1.0, [2, 4], max_new_tokens=5,
                            progress=False)
    assert [(c.budget, c.prompts) for c in cells] == [(2, 2), (4, 2)]
    assert 2 <= cells[0].positions == cells[1].positions <= 10  # 5 per prompt, fewer where a stop token comes
    for cell in cells:
        assert cell.baseline_length == cell.other_length and cell.difference == 0.0 and cell.difference_se == 0.0
    assert 1.0 < cells[0].baseline_length < cells[1].baseline_length <= 5.0


def test_paired_coverage_scores_each_proposer_at_the_same_round_starts(tiny_target):
    from tevcore.proposers.base import NoDrafter
    from tevcore.train.eval import format_paired, paired_coverage

    drafter, flat = _tiny_proposer(tiny_target, 2), NoDrafter(97)
    prompts = [Prompt("a", "1", "x"), Prompt("b", "2", "y"), Prompt("a", "3", "z")]
    ids = {"x": [5, 6, 7], "y": [9, 10, 11], "z": [20, 21]}  # the tiny target has no tokenizer
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tevcore.train.eval.prompt_ids", lambda target, text: ids[text])
        cells = paired_coverage(tiny_target, flat, drafter, prompts, 1.0, [4], max_new_tokens=4, progress=False,
                                by_set=True)
    assert [(c.prompt_set, c.prompts) for c in cells] == [("all", 3), ("a", 2), ("b", 1)]
    whole = cells[0]
    assert whole.positions == cells[1].positions + cells[2].positions >= 3
    pooled = sum(c.difference * c.positions for c in cells[1:]) / whole.positions
    assert pooled == pytest.approx(whole.difference)
    assert whole.difference == pytest.approx(whole.other_length - whole.baseline_length)
    assert whole.difference_se > 0 and "B - A" in format_paired(cells)


def test_a_union_tree_gives_each_tree_the_logits_it_gets_alone(tiny_target):
    from tevcore.engine.builders import best_first
    from tevcore.engine.tree import union
    from tevcore.target.session import TargetSession

    session = TargetSession(tiny_target, hidden_layers=(1, 2))
    session.prefill([5, 6, 7, 8], reserve=16)
    trees = [best_first(session.root_token, _tiny_proposer(tiny_target, seed).propose(session), 6) for seed in (1, 2)]
    alone = []
    for tree in trees:
        alone.append(session.score_tree(tree).logits)
        session.rollback()
    merged, where = union(trees)
    assert merged.size < sum(tree.size for tree in trees)  # the two drafters share some paths
    logits = session.score_tree(merged).logits
    for nodes, own in zip(where, alone):
        torch.testing.assert_close(logits[nodes], own, rtol=1e-5, atol=1e-5)


def test_one_decode_for_several_drafters_gives_the_pairwise_compares_it_replaces(tiny_target):
    """Three drafters and three pairs in one pass: every cell is what paired_coverage gives that pair alone (same
    positions, the same E, differences and clustered s.e. up to float rounding of the shared target forward)."""
    from tevcore.train.eval import paired_coverage, shared_start_coverage

    proposers = [_tiny_proposer(tiny_target, seed) for seed in (1, 2, 3)]
    prompts = [Prompt("a", "1", "x"), Prompt("b", "2", "y"), Prompt("a", "3", "z")]
    ids = {"x": [5, 6, 7], "y": [9, 10, 11], "z": [20, 21]}  # the tiny target has no tokenizer
    pairs = [(0, 1), (0, 2), (1, 2)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tevcore.train.eval.prompt_ids", lambda target, text: ids[text])
        shared = shared_start_coverage(tiny_target, proposers, pairs, prompts, 1.0, [2, 4], max_new_tokens=5,
                                       progress=False, by_set=True)
        alone = [cell for a, b in pairs for cell in paired_coverage(
            tiny_target, proposers[a], proposers[b], prompts, 1.0, [2, 4], max_new_tokens=5, progress=False,
            by_set=True)]
    assert len(shared) == len(alone) == 3 * 2 * 3  # pairs x budgets x (all, a, b)
    for one, other in zip(shared, alone):
        assert (one.temperature, one.budget, one.prompt_set, one.prompts, one.positions, one.baseline,
                one.other) == (other.temperature, other.budget, other.prompt_set, other.prompts, other.positions,
                               other.baseline, other.other)
        for field in ("baseline_length", "other_length", "difference", "difference_se"):
            assert getattr(one, field) == pytest.approx(getattr(other, field), rel=1e-6, abs=1e-9, nan_ok=True)
    assert [c.baseline for c in shared[::6]] == ["seed 1", "seed 1", "seed 2"]
    assert all(c.difference != 0 and c.difference_se > 0 for c in shared if c.prompt_set == "all")
    with pytest.raises(ValueError, match="two different proposers"):
        shared_start_coverage(tiny_target, proposers, [(1, 1)], prompts, 1.0, [2], progress=False)


def test_compare_pairs_are_checked_before_anything_loads(capsys):
    from tevcore.cli import main
    from tevcore.train.eval_cli import compared_pairs

    assert compared_pairs(None, 3) == [(0, 1), (0, 2), (0, 3)]
    assert compared_pairs("0:1,2:1", 2) == [(0, 1), (2, 1)]
    for bad, says in (("0:3", "from 0"), ("1:1", "two different"), ("0:1,0:1", "twice"), ("1-2", "A:B")):
        assert main(["eval-drafter", "a", "--compare", "b", "c", "--budgets", "4", "--pairs", bad]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1
    assert main(["eval-drafter", "a", "--pairs", "0:1"]) == 2
    assert "--pairs needs --compare" in capsys.readouterr().err


def test_the_clustered_standard_error_adds_up_whole_clusters():
    from tevcore.train.eval import _clustered_se

    # cluster sums of deviations from the mean 2.5: (1 + 2) - 5 = -2 and (3 + 4) - 5 = +2
    assert _clustered_se([1.0, 2.0, 3.0, 4.0], [0, 0, 1, 1]) == pytest.approx(math.sqrt(2 * 8) / 4)
    assert math.isnan(_clustered_se([1.0, 2.0], [0, 0]))


def test_compare_refuses_chain_budgets_before_loading_anything(capsys):
    from tevcore.cli import main

    assert main(["eval-drafter", "--compare", "elsewhere", "--budgets", "chain,8"]) == 2
    assert "--compare" in capsys.readouterr().err
