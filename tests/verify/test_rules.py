"""Chi-square tests of the shipped rules, batched: every exact rule follows its own law, the foil does not.

Each (rule, tree, T) case draws N_DRAWS verdicts with `simulate` (the same
rule function a decoding round calls with n = 1) and tests exit counts
against the rule's exit law and bonus-given-exit counts against its masked
rows (`tevcore.verify.laws`). The naive-ratio foil gets the same trees, the
same T and the same number of draws, and must be rejected: the test's power.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy import stats

from verify_cases import KINDS, RULE_CASES
from tevcore.engine.flow import target_flow
from tevcore.lab.simulate import SimulationResult, simulate
from tevcore.verify.laws import VerdictLaw, bonus_pvalue, exit_pvalue
from tevcore.verify.registry import rule_law

pytestmark = pytest.mark.usefixtures("one_thread_module")

EXACT_SAMPLED = ("tev", "predraw", "residual", "chain")
TEMPERATURES = (0.5, 1.0, 1.5)
N_DRAWS = 40_000
ALPHA_EXACT = 1e-4  # per case; 48 fixed-seed cases
ALPHA_FOIL = 0.01


def _draw(name: str, kind: str, temperature: float, seed: int = 0) -> tuple[SimulationResult, VerdictLaw]:
    tree, logits = RULE_CASES[kind]
    case_seed = zlib.crc32(repr((name, kind, temperature, seed)).encode())  # an independent stream per case
    return simulate(name, tree, logits, temperature, N_DRAWS, case_seed), rule_law(name, tree, logits, temperature)


def _assert_invariants(result: SimulationResult, law: VerdictLaw) -> None:
    """Counts add up, exits only where the law puts mass, no banned bonus, E[L] = the law's within 4 SE."""
    assert int(result.exit_counts.sum()) == result.n == int(result.length_counts.sum())
    assert not (result.exit_counts[law.exit_probs == 0] > 0).any()
    for node, (tokens, counts) in result.bonus_counts.items():
        assert int(counts.sum()) == int(result.exit_counts[node])
        assert not set(tokens.tolist()) & set(law.banned_tokens[node])
    gap = abs(result.mean_emitted - law.expected_length)
    assert gap <= 4 * max(result.emitted_stderr, 1e-12) + 1e-9, (result.verifier, gap)


def test_cases_cover_the_shapes():
    shapes = {kind: (tree.size, tree.max_depth, max(len(k) for k in tree.children()))
              for kind, (tree, _) in RULE_CASES.items()}
    assert 0 < float(target_flow(*RULE_CASES["faint"], 1.0).path_prob[1:].min()) < 1e-4
    assert shapes["deep"][1] >= 6 and shapes["bushy"][2] >= 6 and shapes["chain"][2] == 1


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", EXACT_SAMPLED)
def test_exact_rule_follows_its_own_law(name, kind, temperature):
    result, law = _draw(name, kind, temperature)
    _assert_invariants(result, law)
    p_exit, p_bonus = exit_pvalue(result.exit_counts, law), bonus_pvalue(result.bonus_counts, law)
    assert min(p_exit, p_bonus) > ALPHA_EXACT, (p_exit, p_bonus)


def test_foil_is_rejected_at_the_same_sample_size():
    rejected = {}
    for kind in KINDS:
        for temperature in TEMPERATURES:
            result, law = _draw("naive_ratio", kind, temperature)
            rejected[kind, temperature] = exit_pvalue(result.exit_counts, law) < ALPHA_FOIL
    print(f"naive_ratio rejected at {N_DRAWS} draws: {rejected}")
    assert all(rejected[kind, t] for kind in ("bushy", "deep") for t in TEMPERATURES)
    assert np.mean(list(rejected.values())) >= 0.75


def test_chain_bonus_may_be_another_child_of_its_exit():
    """Chain-only tries only its chain child: the tree's other children are legal bonus tokens for it."""
    tree, logits = RULE_CASES["bushy"]
    result, law = _draw("chain", "bushy", 1.0)
    other_children = set(tree.tokens[1:][tree.parents[1:] == 0].tolist()) - set(law.banned_tokens[0])
    assert other_children and set(result.bonus_counts[0][0].tolist()) & other_children
    assert bonus_pvalue(result.bonus_counts, law) > ALPHA_EXACT
    strict = rule_law("tev", tree, logits, 1.0)  # the law that masks every child: chain is not drawn from it
    assert bonus_pvalue(result.bonus_counts, strict, nodes=[0]) < 1e-6


def test_pvalues_over_seeds_are_uniform():
    """One seed proves little: the p-values of 8 seeds per rule on the bushy tree pass a KS test."""
    pvalues = []
    for name in EXACT_SAMPLED:
        for seed in range(1, 9):
            result, law = _draw(name, "bushy", 1.0, seed)
            pvalues += [exit_pvalue(result.exit_counts, law), bonus_pvalue(result.bonus_counts, law)]
    assert stats.kstest(pvalues, "uniform").pvalue > 1e-3


def test_every_rule_entry_states_its_law_and_standing():
    """The app's groupings come from the entries: X for the optimal exact rules, their own for chain and greedy,
    the tree's draws for the proposal-ratio rules, X (the law it would need) for the foil."""
    from tevcore.verify.laws import FOIL, OPTIMAL, OVER_DRAWS, OWN_LAW, T0_ONLY, exit_law
    from tevcore.verify.registry import RULES

    at_one = {name: rule.standing(1.0) for name, rule in RULES.items()}
    assert {n for n, s in at_one.items() if s in (OWN_LAW, T0_ONLY)} == {"chain", "greedy"}
    assert {n for n, s in at_one.items() if s == OVER_DRAWS} == {n for n, r in RULES.items() if r.needs}
    assert {n for n, s in at_one.items() if s == FOIL} == {n for n, r in RULES.items() if not r.exact}
    assert {"tev", "predraw", "residual"} <= {n for n, s in at_one.items() if s == OPTIMAL}
    assert all(RULES[n].law is exit_law for n, s in at_one.items() if s in (OPTIMAL, FOIL))
