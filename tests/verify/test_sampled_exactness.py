"""Exactness of the proposal-ratio rules over the tree's draws: enumeration, Monte Carlo over seeds, T = 0.

1. Exact enumeration on a 4-token synthetic target and drafter (test_exactness's
   machinery): every draw the sampled builder can make (its own code, with the
   draw function replaced by one that branches on every outcome), every branch
   of the rule on each tree, rounds composed; the law of the first tokens
   equals the target's to 1e-12 for rrs with and without replacement and for
   block. The same rules on a fixed tree that claims its children were drawn
   show a clear distance (their foil), and so does block on a non-chain.
2. Monte Carlo: a fresh sampled tree per round through the shipped builder and
   verifier, first-token strings against the target's law by the one
   chi-square, p-values over seeds; the foil caught at the same sample size.
3. T = 0: a sampled tree with rrs or block is greedy decoding.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import pytest
import torch

from sampled_checks import FOIL_PVALUE, claimed_draws, seeds_follow_the_law
from test_exactness import RULE_LAWS, _distance, _draft_rows, _seeded_logits, compose_rounds, target_tokens_law
from tevcore.engine.builders import fixed_width
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.draft_rows import as_draft_rows
from tevcore.engine.sampled import depth_rows, grow_sampled
from tevcore.engine.sampling import log_probs, make_generator
from tevcore.engine.tree import DraftTree
from tevcore.verify.laws import chi_square, chi_square_pvalue
from tevcore.verify.verifiers import get_verifier

pytestmark = pytest.mark.usefixtures("one_thread_module")

VOCAB = 4
START = (3, 1)
Law = dict[tuple[int, int], float]


# ---------------------------------------------------------------- the synthetic round

def _rows(context: tuple[int, ...]):
    return as_draft_rows(_draft_rows(context, depth=3, vocab=VOCAB))


def _node_logits(tree: DraftTree, context: tuple[int, ...]) -> torch.Tensor:
    tokens = tree.tokens.tolist()
    return torch.stack([_seeded_logits("target", context + tuple(tokens[u] for u in tree.path(v)[1:]), vocab=VOCAB)
                        for v in range(tree.num_nodes)])


class _NeedDraw(Exception):
    def __init__(self, q: torch.Tensor, k: int, replace: bool) -> None:
        self.q, self.k, self.replace = q, k, replace


def _outcomes(q: torch.Tensor, k: int, replace: bool):
    """Every ordered draw of k tokens from q and its probability (without replacement: q renormalised)."""
    probs = q.tolist()
    if replace:
        for tokens in itertools.product(range(len(probs)), repeat=k):
            yield list(tokens), float(np.prod([probs[t] for t in tokens]))
        return
    k = min(k, sum(p > 0 for p in probs))  # as sampling.draw_proposals cuts it
    for tokens in itertools.permutations(range(len(probs)), k):
        prob, left = 1.0, 1.0
        for t in tokens:
            prob, left = prob * probs[t] / left, left - probs[t]
        yield list(tokens), prob


def enumerate_trees(builder: str, context: tuple[int, ...], budget: int | None, temperature: float,
                    rows=None) -> list[tuple[float, DraftTree]]:
    """Every tree the sampled builder can draw at `context` (from `rows`, the synthetic drafter's unless given),
    with its probability (the builder's own code)."""
    shape, rows = parse_builder(builder).shape, _rows(context) if rows is None else rows
    out: list[tuple[float, DraftTree]] = []

    def explore(script: list[list[int]], weight: float) -> None:
        step = iter(script)

        def draw(q: torch.Tensor, k: int, replace: bool) -> list[int]:
            try:
                return next(step)
            except StopIteration:
                raise _NeedDraw(q, k, replace) from None

        try:
            out.append((weight, grow_sampled(context[-1], depth_rows(rows, shape), shape, budget, temperature, draw)))
        except _NeedDraw as need:
            for tokens, prob in _outcomes(need.q, need.k, need.replace):
                if prob > 0:
                    explore(script + [tokens], weight * prob)

    explore([], 1.0)
    return out


# ---------------------------------------------------------------- each rule's branches on one tree

def law_rrs(tree: DraftTree, logits: torch.Tensor, temperature: float, fixed_last: bool = True) -> Law:
    """Every accept/reject branch of recursive rejection over each node's draws. A fixed draw (a mixed tree's
    top-1 child) came from the point mass on its token; the drawn ones from q without the fixed tokens (and,
    without replacement, without the earlier draws). `fixed_last`: a mixed node's drawn siblings are tried
    first, in draw order, and its fixed child last (rrs's order); else draw order (fixed first, the earlier
    order)."""
    p = log_probs(logits, temperature).exp()
    draws, tokens = tree.draws, tree.tokens.tolist()
    law: Law = defaultdict(float)

    def visit(node: int, weight: float) -> None:
        drawn_order, _ = draws.at(node)
        flags = draws.fixed_at(node)
        pairs = list(zip(drawn_order, flags))
        if fixed_last:
            pairs = [pair for pair in pairs if not pair[1]] + [pair for pair in pairs if pair[1]]
        residual = p[node].clone()
        q = draws.proposal(node) if pairs else None
        fixed_tokens = [tokens[c] for c, f in pairs if f]
        drawn_before: list[int] = []  # tokens of the earlier draws from q (draw order = try order among them)
        for child, is_fixed in pairs:
            token = tokens[child]
            if is_fixed:
                q_i = torch.zeros_like(q)
                q_i[token] = 1.0
            else:
                q_i = q.clone()
                q_i[fixed_tokens] = 0.0
                if draws.mode == "wor":
                    q_i[drawn_before] = 0.0
                q_i /= q_i.sum()
                drawn_before.append(token)
            accept = min(1.0, float(residual[token] / q_i[token]))
            if accept > 0:
                visit(child, weight * accept)
            weight *= 1.0 - accept
            if weight <= 0:
                return
            residual = (residual - q_i).clamp_min(0.0)
            residual /= residual.sum()
        for y, prob in enumerate(residual.tolist()):
            if prob > 0:
                law[(node, y)] += weight * prob

    visit(0, 1.0)
    return dict(law)


def law_block(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """Block verification's law as sampled-trees.md states it: Pr(tau = i) = h_i prod_{j > i} (1 - h_j)."""
    p = log_probs(logits, temperature).exp()
    tokens, g = tree.tokens.tolist(), tree.num_nodes - 1
    q = [tree.draws.proposal(i) for i in range(g)]
    weights, stops, residuals = [1.0], [], []
    for i in range(1, g + 1):
        weights.append(min(1.0, weights[-1] * float(p[i - 1, tokens[i]] / q[i - 1][tokens[i]])))
    for i in range(g):
        leftover = (weights[i] * p[i] - q[i]).clamp_min(0.0)
        residuals.append(leftover / leftover.sum() if leftover.sum() > 0 else leftover)
        if i:
            mass = float(leftover.sum())
            stops.append(mass / (mass + 1.0 - weights[i]) if mass + 1.0 - weights[i] > 0 else 0.0)
    stops.append(weights[g])  # stops[i - 1] = h_i
    law: Law = defaultdict(float)
    for tau in range(g + 1):
        prob = (stops[tau - 1] if tau else 1.0) * float(np.prod([1.0 - h for h in stops[tau:]]))
        row = residuals[tau] if tau < g else p[g]
        for y, mass in enumerate(row.tolist()):
            if prob * mass > 0:
                law[(tau, y)] += prob * mass
    return dict(law)


RATIO_LAWS = {"rrs": law_rrs, "block": law_block}


def _block_law(verifier: str, trees, temperature: float):
    @lru_cache(maxsize=None)
    def block_law(context: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], float], ...]:
        out: dict[tuple[int, ...], float] = defaultdict(float)
        for weight, tree in trees(context):
            tokens = tree.tokens.tolist()
            rule_law = RATIO_LAWS.get(verifier) or RULE_LAWS[verifier]
            for (node, y), prob in rule_law(tree, _node_logits(tree, context), temperature).items():
                out[tuple(tokens[u] for u in tree.path(node)[1:]) + (y,)] += weight * prob
        return tuple(out.items())

    return block_law


def sampled_tokens_law(verifier: str, builder: str, temperature: float, horizon: int,
                       budget: int | None = None) -> dict[tuple[int, ...], float]:
    trees = lambda context: enumerate_trees(builder, context, budget, temperature)  # noqa: E731
    return compose_rounds(_block_law(verifier, trees, temperature), START, horizon)


def _claimed_draws(tree: DraftTree, context: tuple[int, ...], temperature: float) -> DraftTree:
    """A fixed tree that claims each node drew its children once each, in index order, from its q row."""
    rows = _rows(context)

    def q_row(node: int) -> torch.Tensor:
        path = tree.path(node)
        first = int(tree.tokens[path[1]]) if len(path) > 1 else None
        return log_probs(rows.row(len(path), first).double(), temperature).exp()

    return claimed_draws(tree, q_row)


def fixed_tokens_law(verifier: str, widths: list[int], temperature: float, horizon: int) -> dict:
    """The rule on the top-k tree of the same rows, as if its children had been drawn: the foil."""
    def trees(context):
        fixed = fixed_width(context[-1], _rows(context), widths)
        return [(1.0, _claimed_draws(fixed, context, temperature))]

    return compose_rounds(_block_law(verifier, trees, temperature), START, horizon)


# ---------------------------------------------------------------- 1. exact enumeration

QUICK_CASES = [("rrs", "sampled:2,1", None, 2, 1.0), ("rrs", "sampled-wor:2,1", None, 2, 1.0),
               ("block", "sampled:1,1,1", None, 2, 1.0)]
SLOW_CASES = [(v, b, budget, h, t) for v, b, budget, h in [
    ("rrs", "sampled:2,1", None, 3), ("rrs", "sampled:3,2", 6, 2), ("rrs", "sampled:1,1,1", None, 3),
    ("rrs", "sampled-wor:2,2", None, 2), ("rrs", "sampled-wor:3,1,1", 5, 2), ("block", "sampled:1,1,1", None, 3),
    ("block", "sampled:1,1", None, 3), ("block", "sampled-wor:1,1,1", None, 3)] for t in (0.7, 1.0)]
# float64 rounding: a residual normalised after near-total cancellation (r close to q) carries ~1e-12 absolute
# error into a cell (rrs on sampled-wor:3,1,1 at T = 0.7 reaches 2.8e-12; every other case stays below 2e-14)
TOLERANCE = 1e-11


@pytest.mark.parametrize("verifier,builder,budget,horizon,temperature",
                         QUICK_CASES + [pytest.param(*case, marks=pytest.mark.slow) for case in SLOW_CASES])
def test_enumerated_law_over_draws_equals_target(verifier, builder, budget, horizon, temperature):
    law = sampled_tokens_law(verifier, builder, temperature, horizon, budget)
    worst, tv = _distance(law, target_tokens_law(temperature, VOCAB, START, horizon))
    print(f"{verifier} on {builder} (budget {budget}) at T={temperature}: max abs diff {worst:.2g}")
    assert worst <= TOLERANCE


def test_block_accepts_more_than_token_level_rejection():
    """On the same sampled chain, block verification accepts more than rrs (k = 1: token-level rejection)."""
    def mean_length(verifier):
        total = 0.0
        for weight, tree in enumerate_trees("sampled:1,1,1", START, None, 1.0):
            law = RATIO_LAWS[verifier](tree, _node_logits(tree, START), 1.0)
            total += weight * sum(prob * (int(tree.depths[node]) + 1) for (node, _), prob in law.items())
        return total

    block, rrs = mean_length("block"), mean_length("rrs")
    print(f"sampled chain of 3, T=1: E[L] block {block:.4f}, token-level {rrs:.4f}")
    assert block > rrs + 1e-2  # 2.540 against 2.498 here


@pytest.mark.parametrize("verifier,widths", [("rrs", [2, 1]), ("rrs", [3, 2]), ("block", [1, 1, 1])])
def test_ratio_rules_on_a_fixed_tree_are_not_exact(verifier, widths):
    _, tv = _distance(fixed_tokens_law(verifier, widths, 1.0, 2), target_tokens_law(1.0, VOCAB, START, 2))
    print(f"{verifier} on the fixed top-k tree {widths}, T=1: first-2-token TV distance {tv:.4f}")
    assert tv > 1e-2


@pytest.mark.parametrize("verifier,builder", [("rrs", "sampled:3,2"), ("rrs", "sampled-wor:3,2,1"),
                                              ("rrs", "sampled:1,1,1"), ("block", "sampled:1,1,1")])
def test_shipped_tables_give_the_enumerated_law(verifier, builder):
    """The shipped rule's tables (its registry law: exits and residual bonus rows) equal the branches above, tree by tree."""
    from tevcore.verify.registry import rule_law

    for seed in range(6):
        context = START + (seed % VOCAB,)
        tree = parse_builder(builder)(context[-1], _rows(context), None, 0.9, make_generator(seed))
        logits = _node_logits(tree, context)
        shipped = rule_law(verifier, tree, logits, 0.9)
        for (node, y), prob in RATIO_LAWS[verifier](tree, logits, 0.9).items():
            assert float(shipped.exit_probs[node] * shipped.bonus_probs(node)[y]) == pytest.approx(prob, abs=1e-12)
        assert float(shipped.exit_probs.sum()) == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------- 2. Monte Carlo with a fresh tree per round

MC_STRINGS = 2000
MC_SEEDS = 6


def mc_first_tokens(verifier: str, builder: str, temperature: float, horizon: int, n: int, seed: int,
                    fixed: bool = False, relabel: Callable[[DraftTree], DraftTree] | None = None) -> np.ndarray:
    """Counts of first-`horizon`-token strings: each round a fresh tree by the shipped builder (or, `fixed`, the
    foil's fixed tree; `relabel` rewrites each tree's record, for a foil), one verdict."""
    build, verify = parse_builder(builder), get_verifier(verifier)
    generator = make_generator(seed)
    counts = np.zeros(VOCAB ** horizon)
    for _ in range(n):
        context = START
        while len(context) - len(START) < horizon:
            if fixed:
                tree = _claimed_draws(fixed_width(context[-1], _rows(context), [2, 1]), context, temperature)
            else:
                tree = build(context[-1], _rows(context), None, temperature, generator)
            if relabel is not None:
                tree = relabel(tree)
            verdict = verify(tree, _node_logits(tree, context), temperature, generator)
            context = context + tuple(tree.tokens[verdict.path[1:]].tolist()) + (verdict.bonus_token,)
        counts[int(np.ravel_multi_index(context[len(START):len(START) + horizon], (VOCAB,) * horizon))] += 1
    return counts


def _target_cells(temperature: float, horizon: int) -> np.ndarray:
    law = target_tokens_law(temperature, VOCAB, START, horizon)
    return np.array([law[s] for s in itertools.product(range(VOCAB), repeat=horizon)])


@pytest.mark.slow
@pytest.mark.parametrize("verifier,builder", [("rrs", "sampled:2,2"), ("rrs", "sampled-wor:2,2"),
                                              ("block", "sampled:1,1,1")])
def test_monte_carlo_over_seeds_follows_the_target(verifier, builder):
    cells = _target_cells(1.0, 2)
    pvalues = [chi_square_pvalue(*chi_square(mc_first_tokens(verifier, builder, 1.0, 2, MC_STRINGS, seed), cells))
               for seed in range(MC_SEEDS)]
    follows, ks = seeds_follow_the_law(pvalues)
    print(f"{verifier} on {builder}: {MC_SEEDS} seeds x {MC_STRINGS} strings, p-values "
          f"{np.round(pvalues, 3).tolist()}, KS p {ks:.3f}")
    assert follows


@pytest.mark.slow
def test_monte_carlo_catches_the_foil_at_the_same_size():
    cells = _target_cells(1.0, 2)
    pvalues = [chi_square_pvalue(*chi_square(mc_first_tokens("rrs", "sampled:2,1", 1.0, 2, MC_STRINGS, seed,
                                                             fixed=True), cells)) for seed in range(3)]
    print(f"rrs on the fixed top-k tree: p-values {pvalues}")
    assert max(pvalues) < FOIL_PVALUE


# ---------------------------------------------------------------- 3. T = 0

@pytest.mark.parametrize("verifier,builder", [("rrs", "sampled:3,2,1"), ("rrs", "sampled-wor:2,2,2"),
                                              ("block", "sampled:1,1,1")])
def test_zero_temperature_is_greedy(verifier, builder):
    counts = mc_first_tokens(verifier, builder, 0.0, 3, 20, seed=3)
    greedy = _target_cells(0.0, 3)
    assert counts[greedy.argmax()] == 20 and greedy.max() == 1.0


# ---------------------------------------------------------------- 4. the foil on drawn trees

def law_naive(tree: DraftTree, logits: torch.Tensor, temperature: float) -> Law:
    """The naive ratio rule's every branch: children tried in index order, c accepted with min(1, p(x_c) / q(x_c))
    and no residual update; all rejected, the bonus is p without the children's tokens (p itself when they fill
    the vocabulary), as the registry's foil entry draws it."""
    p = log_probs(logits, temperature).exp()
    q = tree.draft_logp.double().exp()
    tokens, children = tree.tokens.tolist(), tree.children()
    law: Law = defaultdict(float)

    def visit(node: int, weight: float) -> None:
        for child in children[node]:
            accept = min(1.0, float(p[node, tokens[child]] / q[child]))
            if accept > 0:
                visit(child, weight * accept)
            weight *= 1.0 - accept
            if weight <= 0:
                return
        row = p[node].clone()
        held = [tokens[c] for c in children[node]]
        if len(set(held)) < VOCAB:
            row[held] = 0.0
        for y, prob in enumerate((row / row.sum()).tolist()):
            if prob > 0:
                law[(node, y)] += weight * prob

    visit(0, 1.0)
    return dict(law)


RATIO_LAWS["naive_ratio"] = law_naive


@pytest.mark.parametrize("builder", ["sampled:1,1,1", "sampled:2,1", "sampled-wor:2,1"])
def test_the_foil_is_not_exact_on_drawn_trees_either(builder):
    """Drawing the children from the very q the naive rule divides by is not enough: on a sampled chain its exits
    are rrs's and only its bonus (p without the child, not rrs's residual) differs, and that alone moves its
    output law off the target's by far more than rounding."""
    _, tv = _distance(sampled_tokens_law("naive_ratio", builder, 1.0, 2), target_tokens_law(1.0, VOCAB, START, 2))
    print(f"naive_ratio on {builder}, T=1: first-2-token TV distance {tv:.4f}")
    assert tv > 1e-2


@pytest.mark.slow
def test_monte_carlo_catches_the_shipped_foil_on_a_sampled_chain():
    """The shipped naive rule on fresh sampled chains, at the size that passes rrs and block: caught on every seed."""
    cells = _target_cells(1.0, 2)
    pvalues = [chi_square_pvalue(*chi_square(mc_first_tokens("naive_ratio", "sampled:1,1,1", 1.0, 2, MC_STRINGS,
                                                             seed), cells)) for seed in range(2)]
    print(f"naive_ratio on sampled:1,1,1: p-values {pvalues}")
    assert max(pvalues) < FOIL_PVALUE
