"""Drawn children at a proposal temperature of their own, and the per-node shape policy: still exact, and at
T = 0 the policy is the best-first tree.

rrs divides each try by the law the record says it was drawn from, whatever
its temperature, so neither changes the target's law; the enumeration of the
shipped law over every tree (test_siblings_first's machinery) shows it within
1e-12; fresh trees through the shipped builder and verifier pass the
chi-square over seeds in test_mixed_exactness (its Monte Carlo test takes
these builders too).
"""

from __future__ import annotations

import pytest
import torch

from test_exactness import _distance, target_tokens_law
from test_sampled_exactness import START, VOCAB, _node_logits, _rows, _target_cells, enumerate_trees, mc_first_tokens
from test_siblings_first import shipped_tokens_law
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.builders import best_first
from tevcore.engine.sampling import make_generator, probs
from tevcore.verify.laws import exit_law
from tevcore.verify.registry import rule_law

pytestmark = pytest.mark.usefixtures("one_thread_module")

CASES = [("mixed@qt0.5:3,2", None, 1.0), ("mixed-wor@qt2:3,2", 4, 0.7), ("sampled@qt1.5:2,1", None, 1.0),
         ("mixed@qt1:3,1", None, 0.0), ("policy:3,2", None, 1.0), ("policy@sharp0.85:3,2", 4, 1.0), ("policy@qt0.6@sharp0.4:3,2", 5, 1.3),
         ("policy@sharp0.9:2,2", None, 0.6)]


@pytest.mark.parametrize("builder,budget,temperature", CASES)
def test_the_shipped_law_stays_the_target(builder, budget, temperature):
    worst, _ = _distance(shipped_tokens_law(builder, temperature, 2, budget),
                         target_tokens_law(temperature, VOCAB, START, 2))
    print(f"rrs on {builder}, budget {budget}, T={temperature}: max abs diff {worst:.2g}")
    assert worst <= 1e-12


def test_the_proposal_temperature_is_the_one_drawn_from():
    """The record keeps q at the shape's own temperature, and the siblings' law follows it."""
    rows = _rows(START)
    for qt in (0.5, 2.0):
        tree = parse_builder(f"mixed@qt{qt}:3")(START[-1], rows, None, 1.0, make_generator(0))
        assert torch.allclose(tree.draws.proposal(0), probs(rows.shared[0].double(), qt))


def test_the_policy_fixes_sharp_nodes_and_mixes_the_others():
    kinds = set()
    for context in [START + (t,) for t in range(VOCAB)]:
        for _, tree in enumerate_trees("policy@sharp0.85:3,2", context, None, 1.0):
            for node, kids in enumerate(tree.children()):
                if not kids:
                    continue
                flags = tree.draws.fixed_at(node)
                sharp = float(probs(_rows(context).row(int(tree.depths[node]) + 1, None).double(), 1.0).max()) >= 0.85
                assert all(flags) if sharp else (flags[0] and not any(flags[1:]))
                kinds.add(sharp)
    assert kinds == {True, False}


@pytest.mark.parametrize("budget", [3, 6])
def test_at_zero_temperature_the_policy_is_best_first_and_greedy(budget):
    for seed in range(4):
        context = START + (seed,)
        rows = _rows(context)
        tree = parse_builder("policy:3,2,1")(context[-1], rows, budget, 0.0, make_generator(seed))
        fixed = best_first(context[-1], rows, budget)
        assert tree.tokens.tolist() == fixed.tokens.tolist() and tree.parents.tolist() == fixed.parents.tolist()
        assert bool(tree.draws.fixed.all())
        logits = _node_logits(tree, context)
        law, optimal = rule_law("rrs", tree, logits, 0.0), exit_law(fixed, logits, 0.0)
        assert torch.allclose(law.exit_probs, optimal.exit_probs, atol=1e-12)  # X of best-first: its 1 + C
    counts = mc_first_tokens("rrs", "policy:3,2,1", 0.0, 3, 20, seed=3)
    greedy = _target_cells(0.0, 3)
    assert counts[greedy.argmax()] == 20 and greedy.max() == 1.0


def test_a_mixed_tree_at_zero_temperature_with_a_proposal_temperature_draws_siblings_and_stays_greedy():
    tree = parse_builder("mixed@qt1:3,2")(START[-1], _rows(START), None, 0.0, make_generator(1))
    assert tree.size > 2  # siblings drawn, where at the round's T = 0 the tree would be the greedy chain
    counts = mc_first_tokens("rrs", "mixed@qt1:3,2", 0.0, 3, 20, seed=4)
    assert counts[_target_cells(0.0, 3).argmax()] == 20
