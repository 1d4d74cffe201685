"""Tree designs at the same contexts of one decode: E[L] per design, paired differences clustered by prompt."""

from __future__ import annotations

import pytest
import torch

from tevcore.cli import main
from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.proposers.block import BlockDrafter, BlockDrafterConfig, BlockProposer
from tevcore.target.session import TargetSession
from tevcore.train.designs import FIXED_FIRST, compare_designs, format_designs, parse_design

PROMPTS = [[5, 6, 7, 8], [9, 10, 11], [12, 13]]


@pytest.fixture
def proposer(tiny_target):
    config = BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=97,
                                hidden_layers=(1, 2), context=4, depth=3, layers=1, heads=4, ffn=64)
    torch.manual_seed(0)
    return BlockProposer(BlockDrafter(config, torch.arange(97)).attach(tiny_target))


def test_a_design_names_a_builder_and_a_rule_it_pairs_with():
    assert parse_design("mixed:2,1,1=rrs").name == "mixed:2,1,1 + rrs"
    assert parse_design(f"mixed@qt0.7:2,1={FIXED_FIRST}").rule == FIXED_FIRST
    for bad, message in [("best_first", "BUILDER=RULE"), ("best_first=rrs", "verifier rrs"),
                         (f"best_first={FIXED_FIRST}", "verifier rrs"), ("nope=tev", "unknown builder")]:
        with pytest.raises(ValueError, match=message):
            parse_design(bad)


def test_every_design_is_measured_at_the_same_positions_and_the_baseline_is_exact(tiny_target, proposer):
    designs = [parse_design(d) for d in ("best_first=tev", f"mixed:2,1={FIXED_FIRST}", "mixed:2,1=rrs",
                                         "policy:2,1=rrs")]
    cells = compare_designs(tiny_target, proposer, designs, PROMPTS, 1.0, [4], draws=2, max_new_tokens=3,
                            progress=False)
    assert [c.design for c in cells] == [d.name for d in designs]
    assert len({c.positions for c in cells}) == 1 and cells[0].positions >= len(PROMPTS)
    assert cells[0].difference == 0.0 and all(1.0 <= c.length <= 5.0 for c in cells)
    for cell in cells[1:]:
        assert cell.difference == pytest.approx(cell.length - cells[0].length)
        assert cell.difference_se >= 0
    # the baseline's first position, recomputed: 1 + C of the best-first tree at the first prompt's context
    session = TargetSession(tiny_target, hidden_layers=proposer.hidden_layers)
    session.prefill(PROMPTS[0], reserve=8)
    tree = best_first(session.root_token, proposer.propose(session), 4)
    first = target_flow(tree, session.score_tree(tree).logits, 1.0).expected_length
    one = compare_designs(tiny_target, proposer, designs[:1], PROMPTS[:1], 1.0, [4], max_new_tokens=1,
                          progress=False)
    assert one[0].positions == 1 and one[0].length == pytest.approx(first, abs=1e-5)
    assert "vs first" in format_designs(cells)


def test_all_pairs_compares_every_two_designs_with_their_own_paired_se(tiny_target, proposer):
    """Two designs after the first are compared directly: their difference is the difference of their differences
    from the first, and its s.e. is that of their own paired differences, not the sum through the first."""
    designs = [parse_design(d) for d in ("best_first=tev", "sampled:2,1=rrs", "mixed:2,1=rrs", "policy:2,1=rrs")]
    cells = compare_designs(tiny_target, proposer, designs, PROMPTS, 1.0, [4, 6], draws=2, max_new_tokens=3,
                            progress=False, all_pairs=True)
    for budget in (4, 6):
        against = {c.design: c for c in cells if c.budget == budget and c.baseline == designs[0].name}
        pairs = {(c.design, c.baseline): c for c in cells if c.budget == budget and c.baseline != designs[0].name}
        assert list(against) == [d.name for d in designs]
        assert sorted(pairs) == sorted((designs[d].name, designs[b].name) for b in (1, 2) for d in range(b + 1, 4))
        for (design, baseline), pair in pairs.items():
            assert pair.difference == pytest.approx(against[design].difference - against[baseline].difference)
            assert pair.length == pytest.approx(against[design].length)
            assert 0 <= pair.difference_se and pair.positions == against[design].positions
    plain = compare_designs(tiny_target, proposer, designs, PROMPTS, 1.0, [4, 6], draws=2, max_new_tokens=3,
                            progress=False)
    assert plain == [c for c in cells if c.baseline == designs[0].name]  # the same draws, the same cells
    text = format_designs(cells)
    assert "vs first" in text and "design minus the other" in text and "design minus" not in format_designs(plain)


def test_at_zero_temperature_the_policy_is_best_first(tiny_target, proposer):
    designs = [parse_design(d) for d in ("best_first=tev", "policy:2,1,1=rrs", "mixed:2,1,1=rrs")]
    cells = compare_designs(tiny_target, proposer, designs, PROMPTS, 0.0, [3, 6], max_new_tokens=3, progress=False)
    policy = [c for c in cells if c.design.startswith("policy")]
    assert policy and all(abs(c.difference) < 1e-9 and c.difference_se < 1e-9 for c in policy)


def test_the_command_refuses_a_bad_design_in_one_line(capsys):
    assert main(["compare-designs", "--all-pairs", "--design", "best_first=rrs"]) == 2
    err = capsys.readouterr().err
    assert "verifier rrs" in err and "Traceback" not in err
