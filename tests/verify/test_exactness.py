"""Exactness of the verifiers: enumeration, Monte Carlo chi-square over seeds, a real tree.

1. Exact enumeration on a 6-token synthetic target: each verifier's law per
   round is derived from its own rule (every drawn token, every accept or
   reject branch), three rounds are composed, and the law of the first three
   tokens must equal the target's product of conditionals.
2. The foil's batched rule and its single draws follow the foil's own
   enumerated law (so what the chi-square tests of tests/verify/test_rules.py
   catch is the rule itself); every rule at T = 0 is the greedy verdict.
3. The single-draw `verify` functions pass the chi-square test with fewer draws.
4. A real tree of the default target.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import numpy as np
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from verify_cases import RULE_CASES
from tevcore.engine.builders import best_first, chain, fixed_width
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.engine.flow import target_flow
from tevcore.target.loading import encode_prompt
from tevcore.engine.sampling import log_probs, make_generator, masked_probs
from tevcore.lab.simulate import SimulationResult, count_verdicts, simulate
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree
from tevcore.verify.laws import VerdictLaw, bonus_pvalue, chi_square, chi_square_pvalue, exit_law, exit_pvalue
from tevcore.verify.registry import rule_law
from tevcore.verify.synthetic import compose_rounds, draft_rows, seeded_logits, strings_law
from tevcore.verify.verifiers import EXACT_VERIFIERS, VERIFIERS, chain_subtree

SAMPLED_EXACT = ("tev", "predraw", "residual", "chain")  # exact at every T; greedy is exact at T = 0


pytestmark = pytest.mark.usefixtures("one_thread_module")  # many small tensor ops: one thread


# ---------------------------------------------------------------- 1. exact enumeration

VOCAB = 6
START = (4, 1)
HORIZON = 3
BUILDERS = {
    "best_first": lambda root, logq: best_first(root, logq, 5),
    "width_3_2_1": lambda root, logq: fixed_width(root, logq, [3, 2, 1]),
    "chain": lambda root, logq: chain(root, logq),
}
Law = dict[tuple[int, int], float]  # (exit node, bonus token) -> probability


def _seeded_logits(*key: object, vocab: int = VOCAB) -> torch.Tensor:
    """A fixed pseudo-random logit row per key (prefix, or prefix and depth): the synthetic models."""
    return seeded_logits(*key, vocab=vocab, keyed_by_vocab=vocab != VOCAB)


def _draft_rows(context: tuple[int, ...], depth: int = 3, vocab: int = VOCAB) -> torch.Tensor:
    """The synthetic block drafter: the target's rows along its greedy path, plus seeded noise."""
    return draft_rows(lambda path: _seeded_logits("target", path, vocab=vocab),
                      lambda start, d: _seeded_logits("draft", start, d, vocab=vocab), context, depth)


def _synthetic_tree(builder: str, context: tuple[int, ...]) -> tuple[DraftTree, torch.Tensor]:
    """The round's tree from the synthetic block drafter, and the target's logits at its nodes."""
    depth_logq = _draft_rows(context)
    tree = BUILDERS[builder](context[-1], depth_logq)
    tokens = tree.tokens.tolist()
    rows = [_seeded_logits("target", context + tuple(tokens[u] for u in tree.path(v)[1:]))
            for v in range(tree.num_nodes)]
    return tree, torch.stack(rows)


def _children_by_token(tree: DraftTree) -> list[dict[int, int]]:
    tokens = tree.tokens.tolist()
    return [{tokens[kid]: kid for kid in kids} for kids in tree.children()]


def law_tev(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """TEV's rule: exit ~ the flow's X, bonus ~ the masked row draw_token samples."""
    exit_mass = target_flow(tree, logits, temperature).exit_mass
    law: Law = {}
    for node in range(tree.num_nodes):
        if exit_mass[node] > 0:
            bonus = masked_probs(logits[node], temperature, tree.child_token_mask(VOCAB)[node])
            law.update({(node, y): float(exit_mass[node] * bonus[y]) for y in range(VOCAB) if bonus[y] > 0})
    return law


def law_predraw(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """Every token the draw at a node can take: a child token moves there, any other ends the round."""
    p = log_probs(logits, temperature).exp().tolist()
    kids = _children_by_token(tree)
    law: Law = defaultdict(float)

    def visit(node: int, weight: float) -> None:
        for y, prob in enumerate(p[node]):
            if prob > 0:
                if y in kids[node]:
                    visit(kids[node][y], weight * prob)
                else:
                    law[(node, y)] += weight * prob

    visit(0, 1.0)
    return dict(law)


def law_residual(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """Every accept/reject branch, with the residual zeroed and renormalised after each rejection."""
    p = log_probs(logits, temperature).exp()
    children, tokens = tree.children(), tree.tokens.tolist()
    law: Law = defaultdict(float)

    def visit(node: int, weight: float) -> None:
        residual = p[node].clone()
        for kid in children[node]:
            accept = float(residual[tokens[kid]])
            if accept > 0:
                visit(kid, weight * accept)
            weight *= 1.0 - accept
            if weight <= 0:
                return
            residual[tokens[kid]] = 0.0
            residual /= residual.sum()
        for y, prob in enumerate(residual.tolist()):
            if prob > 0:
                law[(node, y)] += weight * prob

    visit(0, 1.0)
    return dict(law)


def law_naive_ratio(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """The foil's branches: accept with min(1, p/q) in order, else the masked row."""
    p = log_probs(logits, temperature).exp()
    children, tokens, q = tree.children(), tree.tokens.tolist(), tree.draft_logp.double().exp().tolist()
    law: Law = defaultdict(float)

    def visit(node: int, weight: float) -> None:
        for kid in children[node]:
            accept = min(1.0, float(p[node, tokens[kid]]) / q[kid])
            if accept > 0:
                visit(kid, weight * accept)
            weight *= 1.0 - accept
        rest = p[node].clone()
        rest[[tokens[kid] for kid in children[node]]] = 0.0
        for y, prob in enumerate((rest / rest.sum()).tolist()):
            if weight > 0 and prob > 0:
                law[(node, y)] += weight * prob

    visit(0, 1.0)
    return dict(law)


def law_chain(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """Predraw's branches on the top-1 chain, mapped back to the tree's nodes."""
    sub, ids = chain_subtree(tree)
    return {(int(ids[node]), y): prob for (node, y), prob in law_predraw(sub, logits[ids], temperature).items()}


def law_greedy(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """Follow the argmax; a point mass."""
    kids, node = _children_by_token(tree), 0
    while int(logits[node].argmax()) in kids[node]:
        node = kids[node][int(logits[node].argmax())]
    return {(node, int(logits[node].argmax())): 1.0}


RULE_LAWS = {"tev": law_tev, "predraw": law_predraw, "residual": law_residual, "chain": law_chain,
             "greedy": law_greedy, "naive_ratio": law_naive_ratio}


def first_tokens_law(verifier: str, builder: str, temperature: float) -> dict[tuple[int, ...], float]:
    """Law of the first HORIZON emitted tokens, rounds composed, each round from a fresh tree."""

    @lru_cache(maxsize=None)
    def block_law(context: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], float], ...]:
        tree, logits = _synthetic_tree(builder, context)
        tokens = tree.tokens.tolist()
        law = RULE_LAWS[verifier](tree, logits, temperature)
        return tuple((tuple(tokens[u] for u in tree.path(node)[1:]) + (y,), prob) for (node, y), prob in law.items())

    return compose_rounds(block_law, START, HORIZON)


def target_tokens_law(temperature: float, vocab: int = VOCAB, start: tuple[int, ...] = START,
                      horizon: int = HORIZON) -> dict[tuple[int, ...], float]:
    """The product of target conditionals over every `horizon`-token string."""
    return strings_law(lambda context: _seeded_logits("target", context, vocab=vocab), vocab, start, horizon,
                       temperature)


def _distance(law: dict, reference: dict) -> tuple[float, float]:
    """(max abs difference, total variation distance) between two laws on strings."""
    keys = set(law) | set(reference)
    diffs = [abs(law.get(k, 0.0) - reference.get(k, 0.0)) for k in keys]
    return max(diffs), 0.5 * sum(diffs)


ENUMERATION_CASES = ([(v, b, t) for v in SAMPLED_EXACT for b in BUILDERS for t in (0.6, 1.0, 1.7)]
                     + [(v, b, 0.0) for v in EXACT_VERIFIERS for b in BUILDERS])


@pytest.mark.parametrize("verifier,builder,temperature", ENUMERATION_CASES)
def test_enumerated_law_of_three_rounds_equals_target(verifier, builder, temperature):
    worst, _ = _distance(first_tokens_law(verifier, builder, temperature), target_tokens_law(temperature))
    assert worst <= 1e-10, f"{verifier} on {builder} at T={temperature}: max abs diff {worst:.3g}"


def test_enumerated_trees_are_nontrivial():
    """The synthetic rounds exercise branching, depth and rejections."""
    tree, logits = _synthetic_tree("best_first", START)
    flow = target_flow(tree, logits, 1.0)
    print(f"first synthetic round: {tree.size} nodes, depth {tree.max_depth}, 1 + C = {flow.expected_length:.3f}")
    assert tree.max_depth >= 2 and max(len(k) for k in tree.children()) >= 2
    assert flow.coverage > 0.05


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_enumeration_exposes_the_foil(builder):
    worst, tv = _distance(first_tokens_law("naive_ratio", builder, 1.0), target_tokens_law(1.0))
    print(f"naive_ratio on {builder}, T=1: first-{HORIZON}-token TV distance {tv:.4f} (max cell diff {worst:.4f})")
    assert tv > 1e-2


# ---------------------------------------------------------------- 2. the foil's own rule, T = 0

MC_DRAWS = 100_000
VERIFY_DRAWS = 3000  # single-draw verify() calls per test


def _pvalue_of(counts: np.ndarray, probs: np.ndarray) -> float:
    return chi_square_pvalue(*chi_square(counts.astype(float), probs))


def assert_invariants(result: SimulationResult, law: VerdictLaw) -> None:
    """Counts add up, no bonus is a token the rule tried at its exit, E[L] = the law's within 4 SE."""
    assert int(result.exit_counts.sum()) == result.n == int(result.length_counts.sum())
    for node, (tokens, counts) in result.bonus_counts.items():
        assert int(counts.sum()) == int(result.exit_counts[node])
        assert not set(tokens.tolist()) & set(law.banned_tokens[node])
    gap = abs(result.mean_emitted - law.expected_length)
    assert gap <= 4 * max(result.emitted_stderr, 1e-12) + 1e-9, (result.verifier, gap)


@pytest.mark.slow
def test_foil_follows_its_own_rule():
    """What the test catches is the foil's rule itself: simulate and verify() match its enumerated law."""
    tree, logits = RULE_CASES["deep"]  # a tree where the foil's exit law is spread over many nodes
    rule_law = law_naive_ratio(tree, logits.double(), 1.0)
    exit_probs = np.zeros(tree.num_nodes)
    for (node, _), prob in rule_law.items():
        exit_probs[node] += prob
    simulated = simulate("naive_ratio", tree, logits, 1.0, MC_DRAWS, seed=5).exit_counts.numpy()
    verify, generator = VERIFIERS["naive_ratio"], make_generator(5)
    verified = np.bincount([verify(tree, logits, 1.0, generator).exit_node for _ in range(VERIFY_DRAWS)],
                           minlength=tree.num_nodes)
    p_simulated, p_verified = _pvalue_of(simulated, exit_probs), _pvalue_of(verified, exit_probs)
    print(f"naive_ratio against its own rule: simulate p {p_simulated:.3f}, verify() p {p_verified:.3f}")
    assert (exit_probs > 0.01).sum() >= 5
    assert min(p_simulated, p_verified) > 1e-4


def test_greedy_law_at_zero_temperature():
    for tree, logits in RULE_CASES.values():
        law = exit_law(tree, logits, 0.0)
        for verifier in ("tev", "predraw", "residual", "greedy"):
            result = simulate(verifier, tree, logits, 0.0, 1000, 0)
            assert int(result.exit_counts[law.exit_probs.argmax()]) == 1000
            assert exit_pvalue(result.exit_counts, law) == 1.0 and bonus_pvalue(result.bonus_counts, law) == 1.0


# ---------------------------------------------------------------- 3. single-draw verify()

@pytest.mark.slow
@pytest.mark.parametrize("verifier", SAMPLED_EXACT)
def test_single_draw_verify_follows_the_law(verifier):
    tree, logits = RULE_CASES["bushy"]
    verify, generator = VERIFIERS[verifier], make_generator(7)
    law = rule_law(verifier, tree, logits, 1.0)
    verdicts = [verify(tree, logits, 1.0, generator) for _ in range(VERIFY_DRAWS)]
    assert all(v.path == tree.path(v.exit_node) and v.emitted == len(v.path) for v in verdicts)
    result = count_verdicts(verifier, tree, torch.tensor([v.exit_node for v in verdicts]),
                            torch.tensor([v.bonus_token for v in verdicts]))
    p_exit, p_bonus = exit_pvalue(result.exit_counts, law), bonus_pvalue(result.bonus_counts, law)
    print(f"verify() {verifier}: {VERIFY_DRAWS} draws, exit p {p_exit:.3f}, bonus p {p_bonus:.3f}")
    assert min(p_exit, p_bonus) > 1e-4
    assert_invariants(result, law)


# ---------------------------------------------------------------- 4. a real tree of the default target

@pytest.fixture(scope="module")
def real_tree(default_target):
    session = TargetSession(default_target)
    session.prefill(encode_prompt(default_target, "Give three tips for staying healthy."))
    depth_logq = GreedyRolloutProposer(depth=4).propose(session)
    tree = best_first(session.root_token, depth_logq, 32)
    with sdpa_kernel(SDPBackend.MATH):
        logits = session.score_tree(tree).logits
    session.rollback()
    return session, tree, logits


@pytest.mark.parametrize("verifier", SAMPLED_EXACT)
def test_real_tree_follows_the_law(verifier, real_tree):
    _, tree, logits = real_tree
    law = rule_law(verifier, tree, logits, 1.0)
    result = simulate(verifier, tree, logits, 1.0, MC_DRAWS, seed=11)
    p_exit, p_bonus = exit_pvalue(result.exit_counts, law), bonus_pvalue(result.bonus_counts, law)
    print(f"real tree ({tree.size} nodes, depth {tree.max_depth}, V={logits.shape[1]}) {verifier}: "
          f"exit p {p_exit:.3f}, bonus p {p_bonus:.3f}, {result.seconds:.3f} s")
    assert min(p_exit, p_bonus) > 1e-4
    assert_invariants(result, law)


def test_real_tree_at_zero_temperature_is_greedy_decoding(real_tree, default_target):
    session, tree, logits = real_tree
    verdict = VERIFIERS["greedy"](tree, logits, 0.0, make_generator(0))
    for name in ("tev", "predraw", "residual"):
        assert VERIFIERS[name](tree, logits, 0.0, make_generator(1)) == verdict
    emitted = tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token]
    ids = list(session.committed)
    with sdpa_kernel(SDPBackend.MATH), torch.inference_mode():
        for token in emitted:
            assert int(default_target.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()) == token
            ids.append(token)
