"""The batched rrs and block samplers and their single-draw verifiers against their laws on one sampled tree.

Given one realised tree a proposal-ratio rule is not exact (that is over the
draws, proved in test_sampled_exactness.py); here the shipped samplers are
checked against the law their own acceptance tables define, with the one
chi-square, on trees over a 40-token vocabulary.
"""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.sampling import make_generator
from tevcore.lab.simulate import count_verdicts, simulate
from tevcore.verify.laws import bonus_pvalue, exit_pvalue
from tevcore.verify.registry import rule_law
from tevcore.verify.verifiers import get_verifier
from verify_cases import seeded

VOCAB = 40
CASES = {"iid": "sampled:4,3,2", "wor": "sampled-wor:4,3,2", "chain": "sampled:1,1,1,1,1"}


def sampled_case(kind: str, temperature: float = 1.0):
    rows = torch.log_softmax(1.5 * torch.randn(5, VOCAB, generator=seeded("rows", kind)), -1)
    tree = parse_builder(CASES[kind])(3, rows, 24, temperature, seeded("draws", kind))
    logits = 1.5 * torch.randn(tree.num_nodes, VOCAB, generator=seeded("target", kind))
    for node, kids in enumerate(tree.children()):  # the target often agrees with the draws
        for kid in kids:
            logits[node, tree.tokens[kid]] += 2.0
    return tree, logits


@pytest.mark.parametrize("verifier,kind", [("rrs", "iid"), ("rrs", "wor"), ("rrs", "chain"), ("block", "chain")])
def test_batched_sampler_follows_its_table_law(verifier, kind):
    tree, logits = sampled_case(kind)
    law = rule_law(verifier, tree, logits, 1.0)
    assert law.exit_probs.sum().item() == pytest.approx(1.0, abs=1e-12)
    result = simulate(verifier, tree, logits, 1.0, 100_000, seed=3)
    p_exit, p_bonus = exit_pvalue(result.exit_counts, law), bonus_pvalue(result.bonus_counts, law)
    print(f"{verifier} on {CASES[kind]} ({tree.size} nodes): exit p {p_exit:.3f}, bonus p {p_bonus:.3f}, "
          f"E[L] {result.mean_emitted:.3f} vs law {law.expected_length:.3f}, 1 + C {law.flow.expected_length:.3f}")
    assert min(p_exit, p_bonus) > 1e-4
    assert abs(result.mean_emitted - law.expected_length) <= 4 * result.emitted_stderr + 1e-9
    for node, (tokens, _) in result.bonus_counts.items():
        assert not set(tokens.tolist()) & set(law.banned_tokens.get(node, []))


@pytest.mark.slow  # 6000 single verify() calls, each building its tables
@pytest.mark.parametrize("verifier,kind", [("rrs", "wor"), ("block", "chain")])
def test_single_draw_verify_follows_the_same_law(verifier, kind):
    tree, logits = sampled_case(kind)
    verify, generator = get_verifier(verifier), make_generator(5)
    verdicts = [verify(tree, logits, 1.0, generator) for _ in range(3000)]
    assert all(v.path == tree.path(v.exit_node) for v in verdicts)
    result = count_verdicts(verifier, tree, torch.tensor([v.exit_node for v in verdicts]),
                            torch.tensor([v.bonus_token for v in verdicts]))
    law = rule_law(verifier, tree, logits, 1.0)
    assert min(exit_pvalue(result.exit_counts, law), bonus_pvalue(result.bonus_counts, law)) > 1e-4


def test_the_check_can_fail():
    """Power: block's draws judged by rrs's law on the same chain are caught (block accepts more)."""
    tree, logits = sampled_case("chain")
    result = simulate("block", tree, logits, 1.0, 100_000, seed=4)
    assert exit_pvalue(result.exit_counts, rule_law("rrs", tree, logits, 1.0)) < 1e-6
