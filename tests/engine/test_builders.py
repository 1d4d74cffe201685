"""Builders against brute-force prefix enumeration, plus their error paths."""

import itertools
import math

import pytest
import torch

from tevcore.engine.builders import best_first, chain, fixed_width
from tevcore.engine.draft_rows import DraftRows

ROOT = 9


def rows(seed, depth=3, vocab=5):
    generator = torch.Generator().manual_seed(seed)
    return torch.log_softmax(2 * torch.randn(depth, vocab, generator=generator), -1)


def prefixes(tree):
    """Every node as the token tuple from the root (root excluded)."""
    return {tuple(int(tree.tokens[n]) for n in tree.path(node)[1:]) for node in range(1, tree.num_nodes)}


def score(logq, prefix):
    rows_ = logq.tolist()
    total = 0.0
    for depth, token in enumerate(prefix):  # same left-to-right order as the builder
        total += rows_[depth][token]
    return total


def ranked_prefixes(logq):
    """All prefixes of length 1..K, best draft score first."""
    depth, vocab = logq.shape
    every = [p for d in range(1, depth + 1) for p in itertools.product(range(vocab), repeat=d)]
    return sorted(every, key=lambda p: score(logq, p), reverse=True)


@pytest.mark.parametrize("seed", range(20))
def test_best_first_is_top_budget_prefixes(seed):
    logq = rows(seed)
    ranked = ranked_prefixes(logq)
    for budget in range(31):
        tree = best_first(ROOT, logq, budget)
        got = prefixes(tree)
        assert tree.size == budget and len(got) == budget
        assert got == set(ranked[:budget]), f"seed {seed}, budget {budget}"
        # strictly separated from the rest, so the set is the unique answer
        if 0 < budget < len(ranked):
            assert score(logq, ranked[budget - 1]) > score(logq, ranked[budget])
        assert all(p[:-1] in got for p in got if len(p) > 1)  # prefix-closed
        assert tree.tokens[0] == ROOT and tree.budget == budget
        for node in range(1, tree.num_nodes):
            want = float(logq[int(tree.depths[node]) - 1, int(tree.tokens[node])])
            assert float(tree.draft_logp[node]) == pytest.approx(want, abs=1e-5)


def test_best_first_budget_beyond_all_prefixes():
    logq = rows(0, depth=2, vocab=3)
    tree = best_first(ROOT, logq, 100)
    assert tree.size == 3 + 9
    assert prefixes(tree) == set(ranked_prefixes(logq))


def test_best_first_never_adds_a_zero_probability_prefix():
    # a drafter that restricts its vocabulary gives -inf outside it; such prefixes are never drafted
    logq = torch.log(torch.tensor([[0.7, 0.3, 0.0], [1.0, 0.0, 0.0]]))
    tree = best_first(ROOT, logq, 10)
    assert tree.size == 2 + 2
    assert torch.isfinite(tree.draft_logp).all()
    assert sorted(tree.tokens[1:].tolist()) == [0, 0, 0, 1]


def test_best_first_tie_break_by_push_order():
    # scores: a=log .5, b=c=log .25, aa=ab=log .25: a four-way tie for the second slot
    logq = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.5, 0.001]]))
    first = best_first(ROOT, logq, 3)
    second = best_first(ROOT, logq, 3)
    for name in ("tokens", "parents", "draft_logp"):
        assert torch.equal(getattr(first, name), getattr(second, name))
    tie = math.log(0.25)
    node_scores = sorted((score(logq, p) for p in prefixes(first)), reverse=True)
    assert node_scores == pytest.approx([math.log(0.5), tie, tie])
    # a is popped first; it pushes its sibling (b) before its child (aa), so b wins the tie, then aa
    tok_a, tok_b = int(logq[0].topk(2).indices[0]), int(logq[0].topk(2).indices[1])
    assert first.tokens[1] == tok_a and first.parents.tolist() == [-1, 0, 0, 1]
    assert first.tokens[2] == tok_b


def test_best_first_uniform_rows_fill_levels():
    logq = torch.full((3, 4), math.log(0.25))
    tree = best_first(ROOT, logq, 4 + 16)
    assert tree.depths[1:].tolist() == [1] * 4 + [2] * 16
    assert prefixes(best_first(ROOT, logq, 4 + 16)) == prefixes(tree)


@pytest.mark.parametrize("seed", range(4))
def test_chain_is_top1_path(seed):
    logq = rows(seed, depth=6, vocab=7)
    best = logq.argmax(-1).tolist()
    tree = chain(ROOT, logq)
    assert tree.tokens.tolist() == [ROOT] + best
    assert tree.parents.tolist() == list(range(-1, 6))
    assert tree.draft_logp[1:].tolist() == pytest.approx(logq.max(-1).values.tolist(), abs=1e-5)
    for budget in (0, 2, 6, 10):
        short = chain(ROOT, logq, budget)
        assert short.tokens.tolist() == [ROOT] + best[: min(budget, 6)]


def test_fixed_width_counts():
    logq = rows(1, depth=3, vocab=5)
    tree = fixed_width(ROOT, logq, [3, 2, 1])
    assert tree.size == 3 + 6 + 6
    assert [len(level) for level in tree.levels()] == [3, 6, 6]
    top3 = set(logq[0].topk(3).indices.tolist())
    assert {int(tree.tokens[n]) for n in tree.levels()[0]} == top3
    assert all(len(kids) == 2 for kids in (tree.children()[int(n)] for n in tree.levels()[0]))
    assert fixed_width(ROOT, logq, [9]).size == 5  # width clipped to the vocabulary
    assert fixed_width(ROOT, logq, [3, 2, 1], budget=15).size == 15
    with pytest.raises(ValueError, match="more than the budget"):
        fixed_width(ROOT, logq, [3, 2, 1], budget=14)
    for widths in ([], [0], [2, -1]):
        with pytest.raises(ValueError, match="widths"):
            fixed_width(ROOT, logq, widths)
    with pytest.raises(ValueError, match="only gives 3 depths"):
        fixed_width(ROOT, logq, [1, 1, 1, 1])


def branching_rows(seed, depth=3, vocab=5, branches=(1, 3)):
    """Shared rows plus different rows below the depth-1 tokens in `branches`."""
    return DraftRows(rows(seed, depth, vocab), {t: rows(seed * 31 + t + 1, depth - 1, vocab) for t in branches})


def path_score(draft, prefix):
    return sum(float(draft.row(d, prefix[0])[token]) for d, token in enumerate(prefix, start=1))


@pytest.mark.parametrize("seed", range(8))
def test_best_first_with_conditioned_rows_is_top_budget_prefixes(seed):
    draft = branching_rows(seed)
    every = [p for d in range(1, 4) for p in itertools.product(range(5), repeat=d)]
    ranked = sorted(every, key=lambda p: path_score(draft, p), reverse=True)
    for budget in (1, 4, 8, 16, 30):
        tree = best_first(ROOT, draft, budget)
        got = prefixes(tree)
        cut = path_score(draft, ranked[budget - 1])
        assert {p for p in got if path_score(draft, p) > cut + 1e-6} == {p for p in ranked if path_score(draft, p) > cut + 1e-6}
        assert sorted(path_score(draft, p) for p in got) == pytest.approx(
            sorted(path_score(draft, p) for p in ranked[:budget]), abs=1e-5)
        for node in range(1, tree.num_nodes):
            prefix = tuple(int(tree.tokens[n]) for n in tree.path(node)[1:])
            want = float(draft.row(len(prefix), prefix[0])[prefix[-1]])
            assert float(tree.draft_logp[node]) == pytest.approx(want, abs=1e-5)
    plain = DraftRows(draft.shared)
    assert best_first(ROOT, plain, 8).to_dict() == best_first(ROOT, draft.shared, 8).to_dict()


def test_chain_and_fixed_width_follow_the_rows_below_their_depth1_token():
    draft = DraftRows(rows(3), {int(rows(3)[0].argmax()): rows(4, depth=2)})
    first = int(draft.shared[0].argmax())
    tree = chain(ROOT, draft)
    assert tree.tokens.tolist() == [ROOT, first] + rows(4, depth=2).argmax(-1).tolist()
    wide = fixed_width(ROOT, draft, [2, 1])
    for node in wide.levels()[1]:
        parent = int(wide.parents[int(node)])
        assert int(wide.tokens[int(node)]) == int(draft.row(2, int(wide.tokens[parent])).argmax())


def test_conditioned_rows_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match="must be 2 x 5"):
        DraftRows(rows(0), {1: rows(1)})


NAN_ROWS = torch.tensor([[0.0, math.nan], [-1.0, -2.0]])


@pytest.mark.parametrize("builder", [best_first, chain, lambda r, q, b: fixed_width(r, q, [1], b)])
@pytest.mark.parametrize(
    "logq, budget, message",
    [
        (NAN_ROWS, 3, "NaN"),
        (torch.tensor([-0.1, -2.0]), 3, "K x V"),
        (torch.zeros(0, 4), 3, "K x V"),
        (torch.log(torch.full((2, 2), 0.5)), -1, "non-negative integer"),
        (torch.log(torch.full((2, 2), 0.5)), 2.5, "non-negative integer"),
    ],
)
def test_bad_inputs(builder, logq, budget, message):
    with pytest.raises(ValueError, match=message):
        builder(ROOT, logq, budget)
