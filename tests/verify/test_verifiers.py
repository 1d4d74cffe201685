"""Verifier registry, calling convention, invariants, T = 0 reduction, the flow handed in, simulate's counts."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builders import best_first, fixed_width
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import make_generator, masked_probs
from tevcore.lab.simulate import simulate
from tevcore.engine.tree import DraftTree
from tevcore.verify.laws import exit_law
from tevcore.verify.registry import rule_law
from tevcore.engine.tree import DRAWN, DRAWN_CHAIN
from tevcore.verify.verifiers import (EXACT_VERIFIERS, NOT_EXACT, SAMPLED_VERIFIERS, VERIFIERS, Verdict, chain_subtree,
                                      get_rule, get_verifier, verifier_label)


pytestmark = pytest.mark.usefixtures("one_thread_module")  # many small tensor ops: one thread


def random_case(seed: int, vocab: int = 30, budget: int = 16) -> tuple[DraftTree, torch.Tensor]:
    """A best-first tree and target logits that often agree with it."""
    generator = torch.Generator().manual_seed(seed)
    tree = best_first(2, torch.log_softmax(2.0 * torch.randn(5, vocab, generator=generator), -1), budget)
    logits = torch.randn(tree.num_nodes, vocab, generator=generator)
    logits[tree.parents[1:], tree.tokens[1:]] += 2.5
    return tree, logits


def test_registry_names_and_labels():
    assert set(VERIFIERS) == {"tev", "predraw", "residual", "greedy", "chain", "naive_ratio"}
    assert set(EXACT_VERIFIERS) | NOT_EXACT == set(VERIFIERS) and not set(EXACT_VERIFIERS) & NOT_EXACT
    assert get_verifier("tev") is VERIFIERS["tev"]
    assert verifier_label("tev") == "tev"
    assert verifier_label("naive_ratio") == "naive_ratio (NOT exact: teaching foil)"
    with pytest.raises(ValueError, match="tev, predraw, residual, greedy, chain, naive_ratio, rrs, block"):
        get_verifier("specinfer")
    assert set(SAMPLED_VERIFIERS) == {"rrs", "block"} and get_verifier("rrs") is SAMPLED_VERIFIERS["rrs"]
    assert {name: set(get_rule(name).needs) for name in ("tev", "rrs", "block", "naive_ratio")} == {
        "tev": set(), "rrs": {DRAWN}, "block": {DRAWN_CHAIN}, "naive_ratio": set()}


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_bad_inputs_are_refused(name):
    tree, logits = random_case(0)
    verify, generator = get_verifier(name), make_generator(0)
    with pytest.raises(ValueError, match="N\\+1"):
        verify(tree, logits[:-1], 1.0, generator)
    with pytest.raises(ValueError, match="vocabulary"):
        verify(tree, logits[:, :2], 1.0, generator)
    with pytest.raises(ValueError, match="temperature"):
        verify(tree, logits, -0.5, generator)


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_root_only_tree(name):
    tree = DraftTree.root_only(4)
    logits = torch.randn(1, 9, generator=torch.Generator().manual_seed(1))
    verdict = get_verifier(name)(tree, logits, 1.0, make_generator(0))
    assert verdict.path == [0] and verdict.exit_node == 0 and verdict.emitted == 1
    assert simulate(name, tree, logits, 1.0, 50, seed=0).exit_counts.tolist() == [50]


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_every_draw_is_a_root_path_with_a_legal_bonus(name):
    verify, generator = get_verifier(name), make_generator(3)
    for seed in range(20):
        tree, logits = random_case(seed)
        for temperature in (0.0, 0.7, 1.3):
            verdict = verify(tree, logits, temperature, generator)
            assert isinstance(verdict, Verdict)
            assert verdict.path[0] == 0 and verdict.path[-1] == verdict.exit_node
            assert verdict.path == tree.path(verdict.exit_node)
            assert verdict.emitted == int(tree.depths[verdict.exit_node]) + 1
            banned = rule_law(name, tree, logits, temperature).banned_tokens[verdict.exit_node]
            assert verdict.bonus_token not in banned


def test_exact_verifiers_reduce_to_greedy_at_zero_temperature():
    for seed in range(30):
        tree, logits = random_case(seed, budget=24)
        greedy = get_verifier("greedy")(tree, logits, 0.0, make_generator(0))
        for name in ("tev", "predraw", "residual"):
            assert get_verifier(name)(tree, logits, 0.0, make_generator(seed)) == greedy, (name, seed)


def test_greedy_always_follows_the_argmax():
    tree, logits = random_case(5)
    verify = get_verifier("greedy")
    assert verify(tree, logits, 1.5, make_generator(0)) == verify(tree, logits, 0.0, make_generator(1))


def test_chain_subtree_takes_the_most_likely_draft_child():
    logq = torch.log_softmax(torch.randn(3, 12, generator=torch.Generator().manual_seed(2)), -1)
    tree = fixed_width(0, logq, [3, 2, 2])
    sub, ids = chain_subtree(tree)
    children = tree.children()
    for parent, child in zip(ids[:-1].tolist(), ids[1:].tolist()):
        assert tree.draft_logp[child] == max(tree.draft_logp[k] for k in children[parent])
    assert sub.size == tree.max_depth and sub.tokens.tolist() == tree.tokens[ids].tolist()


@pytest.mark.parametrize("name", list(VERIFIERS))
@pytest.mark.parametrize("temperature", [0.0, 0.6, 1.0])
def test_a_flow_handed_in_gives_the_same_verdicts(name, temperature):
    """The loop hands its recorded flow to the verifier: the same draws as when the verifier computes its own."""
    tree, logits = random_case(7, budget=24)
    flow = target_flow(tree, logits, temperature)
    verify = get_verifier(name)
    own = [verify(tree, logits, temperature, make_generator(seed)) for seed in range(10)]
    handed = [verify(tree, logits, temperature, make_generator(seed), flow=flow) for seed in range(10)]
    assert own == handed
    with pytest.raises(ValueError, match="flow"):
        verify(tree, logits, temperature + 0.5, make_generator(0), flow=flow)
    with pytest.raises(ValueError, match="N\\+1"):
        verify(tree, logits[:-1], temperature, make_generator(0), flow=flow)


def test_masked_probs_is_the_law_of_the_masked_draw():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    banned = torch.tensor([[True, False, False, False]])
    law = masked_probs(logits, 1.0, banned)
    assert law[0, 0] == 0 and torch.allclose(law.sum(-1), torch.ones(1))
    assert torch.allclose(law[0, 1:], torch.softmax(logits[0, 1:], -1))
    assert masked_probs(logits, 0.0, banned).tolist() == [[0.0, 1.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="banned"):
        masked_probs(logits, 1.0, torch.ones_like(banned))


def test_exit_law_rows():
    tree, logits = random_case(9)
    law = exit_law(tree, logits, 0.8)
    assert abs(float(law.exit_mass.sum()) - 1.0) < 1e-9
    child_tokens = tree.child_token_mask(logits.shape[1])
    for node in range(tree.num_nodes):
        row = law.bonus_probs(node)
        assert abs(float(row.sum()) - 1.0) < 1e-9
        assert (row[child_tokens[node]] == 0).all() and (row[~child_tokens[node]] > 0).all()
    chain = rule_law("chain", tree, logits, 0.8)  # chain-only masks only the chain child it tried
    assert all(len(tokens) <= 1 for tokens in chain.banned_tokens.values())
    assert abs(float(chain.exit_probs.sum()) - 1.0) < 1e-9


def test_simulate_counts_and_seeds():
    tree, logits = random_case(11)
    first = simulate("residual", tree, logits, 1.0, 5000, seed=4)
    again = simulate("residual", tree, logits, 1.0, 5000, seed=4)
    assert torch.equal(first.exit_counts, again.exit_counts)
    assert int(first.exit_counts.sum()) == 5000 == int(first.length_counts.sum())
    assert sum(int(c.sum()) for _, c in first.bonus_counts.values()) == 5000
    greedy = simulate("greedy", tree, logits, 1.0, 300, seed=0)
    assert int(greedy.exit_counts.max()) == 300 and greedy.emitted_stderr == 0.0
    with pytest.raises(ValueError, match="unknown verifier"):
        simulate("nope", tree, logits, 1.0, 10, seed=0)
    with pytest.raises(ValueError, match="n must be"):
        simulate("tev", tree, logits, 1.0, 0, seed=0)


def test_bench_summary_on_synthetic_trees():
    """The latency report's plumbing, without a model: both modes timed, table and goals."""
    from tevcore.lab.bench_verifiers import MODES, ScoredTree, format_table, goals, summarise, time_decisions

    trees = [ScoredTree(16, "best_first", *random_case(seed), forward_s=0.05) for seed in range(2)]
    names = list(VERIFIERS)
    timings = time_decisions(trees, names, rounds=4, temperature=1.0, seed=0)
    assert all(len(t[mode]) == 4 and min(t[mode + "_fraction"]) > 0 for t in timings.values() for mode in MODES)
    rows = summarise(trees, timings, 1.0)
    residual = next(r for r in rows if r["verifier"] == "residual")
    assert [r["verifier"] for r in rows] == names and residual["given_flow_vs_residual"] == 1.0
    assert "naive_ratio (NOT exact: teaching foil)" in format_table(rows)
    assert set(goals(rows)) == {"budget", "tev_over_residual_given_flow", "given_flow_goal_met",
                                "tev_over_residual_including_flow", "including_flow_goal_met"}
    chains = []
    for seed in range(2):
        rows_ = torch.log_softmax(torch.randn(4, 30, generator=torch.Generator().manual_seed(seed)), -1)
        tree = parse_builder("sampled:1,1,1,1")(3, rows_, 16, 1.0, torch.Generator().manual_seed(seed))
        chains.append(ScoredTree(16, "sampled:1,1,1,1", tree, torch.randn(tree.num_nodes, 30), forward_s=0.05))
    timings = time_decisions(chains, ["tev", "residual", "rrs", "block"], rounds=4, temperature=1.0, seed=0)
    sampled_rows = summarise(chains, timings, 1.0)
    assert [r["verifier"] for r in sampled_rows] == ["tev", "residual", "rrs", "block"]
    assert all(r["builder"] == "sampled:1,1,1,1" and r["given_flow_median_ms"] > 0 for r in sampled_rows)
    assert "sampled:1,1,1,1" in format_table(sampled_rows)


def test_standing_says_which_rule_is_exact_for_which_target():
    """Optimal rules share X at every T; greedy joins them only at T = 0; at T = 0 the foil cannot be told apart."""
    from tevcore.verify.laws import FOIL, OPTIMAL, OWN_LAW, T0_ONLY
    from tevcore.verify.registry import law_name, standing

    tree, logits = random_case(4)
    for temperature in (0.0, 1.0):
        x = exit_law(tree, logits, temperature)
        for name in VERIFIERS:
            kind = standing(name, temperature)
            assert (kind == FOIL) == (name in NOT_EXACT)
            own = rule_law(name, tree, logits, temperature)
            if kind in (OPTIMAL, FOIL):  # tested against X (the foil: the law it would need)
                assert torch.allclose(own.exit_probs, x.exit_probs)
                assert law_name(name, temperature).startswith("exit law X(v)")
            else:
                assert law_name(name, temperature).startswith(f"{name}'s own law")
    assert standing("greedy", 0.0) == OPTIMAL and standing("greedy", 1.0) == T0_ONLY
    assert standing("chain", 1.0) == OWN_LAW
    greedy = rule_law("greedy", tree, logits, 1.0)
    assert greedy.expected_length != pytest.approx(exit_law(tree, logits, 1.0).expected_length)  # not this target's
    # at T = 0 every row is one token: the foil takes the argmax child (ratio >= 1) and no other (ratio 0)
    foil = simulate("naive_ratio", tree, logits, 0.0, 2000, 0)
    exits = exit_law(tree, logits, 0.0).exit_probs
    assert torch.equal(foil.exit_counts.double() / foil.n, exits)
