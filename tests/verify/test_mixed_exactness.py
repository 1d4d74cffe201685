"""Exactness of rrs on mixed trees (each node's top-1 child fixed, its siblings drawn from q without it).

The machinery is test_sampled_exactness's: the shipped builder's own code with
a draw function that branches on every outcome, every branch of the rule on
each tree (`law_rrs` there states a fixed child as a draw from a point mass),
rounds composed into the law of the first tokens.

1. Exact enumeration over every mixed tree, with and without replacement,
   at T != 1 and T = 0, with budgets that cut the shape: the law equals the
   target's to TOLERANCE. The rules exact given any tree (residual, predraw)
   on the same trees too. The foil: the same trees with their fixed children
   relabelled as draws from q (rrs then divides by a q nothing was drawn
   from) shows a clear distance.
2. Monte Carlo: a fresh mixed tree per round through the shipped builder and
   verifier, first-token strings against the target by the one chi-square,
   p-values over seeds; the relabelled foil caught at the same sample size.
3. T = 0: a mixed tree verified by rrs is greedy decoding.
"""

from __future__ import annotations

import numpy as np
import pytest

from sampled_checks import FOIL_PVALUE, seeds_follow_the_law
from test_exactness import _distance, compose_rounds, target_tokens_law
from test_sampled_exactness import (MC_SEEDS, MC_STRINGS, RATIO_LAWS, START, TOLERANCE, VOCAB, _block_law,
                                    _node_logits, _rows, _target_cells, enumerate_trees, mc_first_tokens,
                                    sampled_tokens_law)
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.draws import DrawRecord
from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree
from tevcore.verify.laws import chi_square, chi_square_pvalue, rrs_fixed_first_law
from tevcore.verify.registry import rule_law

pytestmark = pytest.mark.usefixtures("one_thread_module")


def as_if_drawn(tree: DraftTree) -> DraftTree:
    """The foil: the mixed tree with its fixed children recorded as draws from q (the record's flags dropped)."""
    draws = tree.draws
    relabelled = DrawRecord(draws.mode, draws.parents, draws.children, draws.q, rows=draws.rows, row_of=draws.row_of)
    return DraftTree(tokens=tree.tokens, parents=tree.parents, draft_logp=tree.draft_logp, budget=tree.budget,
                     draws=relabelled)


def relabelled_tokens_law(builder: str, temperature: float, horizon: int) -> dict[tuple[int, ...], float]:
    def trees(context: tuple[int, ...]) -> list[tuple[float, DraftTree]]:
        return [(weight, as_if_drawn(tree)) for weight, tree in enumerate_trees(builder, context, None, temperature)]

    return compose_rounds(_block_law("rrs", trees, temperature), START, horizon)


# ---------------------------------------------------------------- 1. exact enumeration

QUICK_CASES = [("rrs", "mixed:2,1", None, 2, 1.0), ("rrs", "mixed-wor:3,1", None, 2, 0.7),
               ("rrs", "mixed:3,2", 5, 2, 1.3), ("rrs", "mixed-wor:2,2", None, 3, 0.0),
               ("residual", "mixed:3,1", None, 2, 0.7), ("predraw", "mixed-wor:2,2", None, 2, 1.0)]
SLOW_CASES = [(v, b, budget, h, t) for v, b, budget, h in [
    ("rrs", "mixed:2,2", None, 3), ("rrs", "mixed:3,2", None, 2), ("rrs", "mixed:1,1,1", None, 3),
    ("rrs", "mixed-wor:3,2", None, 2), ("rrs", "mixed-wor:4,2", 6, 2), ("rrs", "mixed:3,2,1", 4, 2),
    ("rrs", "mixed-wor:2,2,2", 5, 2)] for t in (0.7, 1.0, 1.6)]


@pytest.mark.parametrize("verifier,builder,budget,horizon,temperature",
                         QUICK_CASES + [pytest.param(*case, marks=pytest.mark.slow) for case in SLOW_CASES])
def test_enumerated_law_over_mixed_trees_equals_target(verifier, builder, budget, horizon, temperature):
    law = sampled_tokens_law(verifier, builder, temperature, horizon, budget)
    worst, _ = _distance(law, target_tokens_law(temperature, VOCAB, START, horizon))
    print(f"{verifier} on {builder} (budget {budget}) at T={temperature}: max abs diff {worst:.2g}")
    assert worst <= TOLERANCE


def test_enumerated_mixed_trees_are_mixed():
    """The enumeration reaches trees with a fixed child and drawn siblings, and nothing else: every node that has
    children has exactly one fixed child, q's top-1, first; a cut budget shows up as smaller trees."""
    trees = enumerate_trees("mixed-wor:3,2", START, None, 1.0)
    cut = enumerate_trees("mixed-wor:3,2", START, 4, 1.0)
    assert sum(w for w, _ in trees) == pytest.approx(1.0) and sum(w for w, _ in cut) == pytest.approx(1.0)
    assert len(trees) > 10 and max(t.size for _, t in cut) == 4 < max(t.size for _, t in trees)
    for _, tree in trees:
        for node, kids in enumerate(tree.children()):
            if kids:
                flags = tree.draws.fixed_at(node)
                assert flags[0] and not any(flags[1:])
                children, _ = tree.draws.at(node)
                assert int(tree.tokens[children[0]]) == int(tree.draws.proposal(node).argmax())


@pytest.mark.parametrize("builder", ["mixed:2,1", "mixed:3,2", "mixed-wor:3,1"])
def test_the_relabelled_foil_is_not_exact(builder):
    _, tv = _distance(relabelled_tokens_law(builder, 1.0, 2), target_tokens_law(1.0, VOCAB, START, 2))
    print(f"rrs on {builder} with its fixed children relabelled as q-draws, T=1: first-2-token TV {tv:.4f}")
    assert tv > 1e-2


@pytest.mark.parametrize("builder", ["mixed:3,2", "mixed-wor:3,2,1", "mixed:1,1,1"])
def test_shipped_tables_give_the_enumerated_law(builder):
    """The shipped rrs tables (exits and residual bonus rows) equal the enumerated branches, tree by tree."""
    for seed in range(6):
        context = START + (seed % VOCAB,)
        tree = parse_builder(builder)(context[-1], _rows(context), None, 0.9, make_generator(seed))
        assert tree.draws.mixed
        logits = _node_logits(tree, context)
        shipped = rule_law("rrs", tree, logits, 0.9)
        for (node, y), prob in RATIO_LAWS["rrs"](tree, logits, 0.9).items():
            assert float(shipped.exit_probs[node] * shipped.bonus_probs(node)[y]) == pytest.approx(prob, abs=1e-12)
        assert float(shipped.exit_probs.sum()) == pytest.approx(1.0, abs=1e-12)


def test_a_fixed_child_is_reached_with_the_target_probability_of_its_token():
    """Point mass first, the fixed child's acceptance is p(x) on every tree (min(1, r(x) / 1) with r = p), not
    min(1, p(x) / q(x)). Siblings first, it depends on which siblings were drawn, and only over the draws is it
    p(x): the siblings never propose x, so the fixed child is x's only way out."""
    trees = enumerate_trees("mixed:3", START, None, 1.0)
    reached = []
    for weight, tree in trees:
        logits = _node_logits(tree, START)
        first = tree.draws.at(0)[0][0]
        assert tree.draws.fixed_at(0)[0]
        edge = float(rule_law("rrs", tree, logits, 1.0).flow.edge_prob[first])
        assert float(rrs_fixed_first_law(tree, logits, 1.0).exit_probs[first]) == pytest.approx(edge, abs=1e-12)
        reached.append((weight, float(rule_law("rrs", tree, logits, 1.0).exit_probs[first])))
    assert max(r for _, r in reached) - min(r for _, r in reached) > 1e-3
    assert sum(w * r for w, r in reached) == pytest.approx(edge, abs=1e-12)


# ---------------------------------------------------------------- 2. Monte Carlo with a fresh tree per round

@pytest.mark.slow
@pytest.mark.parametrize("builder", ["mixed:3,2", "mixed-wor:3,2", "policy:3,2", "mixed@qt0.6:3,2"])
def test_monte_carlo_over_seeds_follows_the_target(builder):
    cells = _target_cells(1.0, 2)
    pvalues = [chi_square_pvalue(*chi_square(mc_first_tokens("rrs", builder, 1.0, 2, MC_STRINGS, seed), cells))
               for seed in range(MC_SEEDS)]
    follows, ks = seeds_follow_the_law(pvalues)
    print(f"rrs on {builder}: {MC_SEEDS} seeds x {MC_STRINGS} strings, p-values {np.round(pvalues, 3).tolist()}, "
          f"KS p {ks:.3f}")
    assert follows


@pytest.mark.slow
def test_monte_carlo_catches_the_relabelled_foil_at_the_same_size():
    cells = _target_cells(1.0, 2)
    pvalues = [chi_square_pvalue(*chi_square(mc_first_tokens("rrs", "mixed:3,2", 1.0, 2, MC_STRINGS, seed,
                                                             relabel=as_if_drawn), cells)) for seed in range(3)]
    print(f"rrs on mixed:3,2 relabelled as q-draws: p-values {pvalues}")
    assert max(pvalues) < FOIL_PVALUE


# ---------------------------------------------------------------- 3. T = 0

@pytest.mark.parametrize("builder", ["mixed:3,2,1", "mixed-wor:2,2,2"])
def test_zero_temperature_is_greedy(builder):
    counts = mc_first_tokens("rrs", builder, 0.0, 3, 20, seed=3)
    greedy = _target_cells(0.0, 3)
    assert counts[greedy.argmax()] == 20 and greedy.max() == 1.0

