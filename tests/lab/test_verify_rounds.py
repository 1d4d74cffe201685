"""`verify_rounds`: one verdict per round over fresh sampled trees, block lengths beside each tree's 1 + C."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from tevcore.engine.builders import chain
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.sampling import make_generator
from tevcore.engine.flow import target_flow
from tevcore.lab.simulate import gap_text, simulate, verify_rounds

pytestmark = pytest.mark.usefixtures("one_thread_module")


def _one_context_rounds(builder: str, p: torch.Tensor, q: torch.Tensor, rounds: int, seed: int):
    """Fresh trees of `builder` drawn from q at one context whose target row is p (every node's row is p)."""
    made, generator = parse_builder(builder), make_generator(seed)
    logq = q.log().unsqueeze(0).expand(3, -1)  # three depths of the same row
    out = []
    for _ in range(rounds):
        tree = made(0, logq, None, 1.0, generator)
        out.append((tree, p.log().expand(tree.num_nodes, -1).clone()))
    return out


def test_coupled_draw_accepts_where_a_fixed_guess_is_a_coin_flip():
    """p = q uniform over 10 tokens: the sampled node is always accepted by rrs (1 - TV = 1); the fixed guess
    (the drafter's argmax, a one-node chain) is accepted with p(x) = 0.1."""
    uniform = torch.full((10,), 0.1, dtype=torch.float64)
    sampled = _one_context_rounds("sampled:1", uniform, uniform, 400, seed=1)
    found = verify_rounds(["rrs", "tev"], sampled, 1.0, seed=2)
    assert found["rrs"].emitted.tolist() == [2] * 400
    assert torch.allclose(found["rrs"].expected_lengths, torch.full((400,), 1.1, dtype=torch.float64))
    assert found["rrs"].length_gap()[0] == pytest.approx(0.9)
    fixed_tree = chain(0, uniform.log().unsqueeze(0), 1)
    fixed = verify_rounds(["tev"], [(fixed_tree, uniform.log().expand(2, -1).clone())] * 1000, 1.0, seed=3)["tev"]
    accepted = int((fixed.emitted == 2).sum())
    assert stats.binomtest(accepted, 1000, 0.1).pvalue > 1e-3
    mean, stderr = fixed.mean_emitted()
    assert stderr == pytest.approx(math.sqrt(0.09 / 1000), rel=0.15)
    assert abs(fixed.length_gap()[0]) < 4 * fixed.length_gap()[1]


def test_first_tokens_over_fresh_trees_follow_the_target_and_catch_the_foil():
    """At one context, rrs's first token over fresh sampled trees is a target sample (exact over the draws);
    the naive ratio rule on the same trees is caught by the same test at the same sample size."""
    p = torch.tensor([0.55, 0.25, 0.15, 0.05], dtype=torch.float64)
    q = torch.tensor([0.10, 0.20, 0.30, 0.40], dtype=torch.float64)
    rounds = _one_context_rounds("sampled:2", p, q, 800, seed=4)
    found = verify_rounds(["rrs", "naive_ratio", "tev"], rounds, 1.0, seed=5)
    assert found["rrs"].first_token_pvalue(p) > 1e-3
    assert found["tev"].first_token_pvalue(p) > 1e-3  # exact given each tree, so over the draws too
    assert found["naive_ratio"].first_token_pvalue(p) < 1e-6
    # every rule saw the same trees: one 1 + C per round for all of them
    assert torch.equal(found["rrs"].expected_lengths, found["tev"].expected_lengths)
    tev_gap, tev_se = found["tev"].length_gap()
    assert abs(tev_gap) < 4 * tev_se  # E[L | tree] = 1 + C(tree) for an exact-given-tree rule


def test_a_rules_verdicts_do_not_depend_on_the_others_run_beside_it():
    p = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    rounds = _one_context_rounds("sampled:2,1", p, p.flip(0), 50, seed=6)
    alone = verify_rounds(["rrs"], rounds, 1.0, seed=7)["rrs"]
    beside = verify_rounds(["tev", "rrs"], rounds, 1.0, seed=7)["rrs"]
    assert torch.equal(alone.emitted, beside.emitted)
    assert torch.equal(alone.first_tokens, beside.first_tokens)


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="at least one round"):
        verify_rounds(["tev"], [], 1.0, seed=0)
    with pytest.raises(ValueError, match="unknown verifier 'nope'"):
        verify_rounds(["nope"], [(chain(0, torch.zeros(1, 4), 1), torch.zeros(2, 4))], 1.0, seed=0)


def test_the_gap_has_an_honest_standard_error_when_every_round_ends_alike():
    """A one-node chain the target accepts with p = 0.9: over a few rounds TEV often accepts every time, and the
    rounds' spread is then 0; the gap's s.e. comes from X's Var(L | tree) = 0.9 * 4 + 0.1 * 1 - 1.9^2 = 0.09 (on
    a10088a it was a bare 0). A rule whose law given the tree is not X gets no s.e. at all: too few rounds."""
    p = torch.tensor([0.9, 0.1], dtype=torch.float64)
    tree = chain(0, p.log().unsqueeze(0), 1)
    rounds = [(tree, p.log().expand(2, -1).clone())] * 5
    seed = next(s for s in range(200) if verify_rounds(["tev"], rounds, 1.0, s)["tev"].emitted.unique().numel() == 1)
    found = verify_rounds(["tev", "chain"], rounds, 1.0, seed)
    gap, stderr = found["tev"].length_gap()
    assert stderr == pytest.approx(math.sqrt(0.09 / 5))
    assert gap == pytest.approx(float(found["tev"].emitted[0]) - 1.9)
    chain_gap, chain_se = found["chain"].length_gap()
    if found["chain"].emitted.unique().numel() == 1:
        assert math.isnan(chain_se) and gap_text(chain_gap, chain_se).endswith("(too few rounds)")
    many = verify_rounds(["tev"], rounds * 200, 1.0, seed)["tev"]  # rounds that differ: the plain s.e.
    values = many.emitted.double() - many.expected_lengths
    assert many.length_gap()[1] == pytest.approx(float(values.std() / math.sqrt(values.numel())))


def test_the_length_variance_of_the_flow_is_that_of_an_optimal_rules_draws():
    """Var(L | tree) from X against the block lengths of 200,000 TEV verifications of one depth-2 chain."""
    node_logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]))
    tree = chain(0, torch.log_softmax(node_logits, -1), 2)
    flow = target_flow(tree, node_logits, 1.0)
    drawn = simulate("tev", tree, node_logits, 1.0, 200_000, seed=11)
    lengths = torch.arange(drawn.length_counts.numel(), dtype=torch.float64)  # L = depth + 1 = index
    shares = drawn.length_counts.double() / drawn.n
    sample_variance = float((shares * lengths ** 2).sum() - (shares * lengths).sum() ** 2)
    assert flow.length_variance(tree) > 0.1
    assert sample_variance == pytest.approx(flow.length_variance(tree), rel=0.02)
