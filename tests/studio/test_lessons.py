"""Every lesson's truth, computed by the package, against the formula of shared/docs/exit-law.md or
sampled-trees.md worked out here by hand on the lesson's setting (and, for rrs on a sampled tree, against an
enumeration of every tree the draw can make)."""

from __future__ import annotations

import math

import pytest
import torch

from tevcore.engine.tree import path_of
from tevcore.studio import lessons
from tevcore.studio.lessons import LESSONS, ChoiceAnswer

# The one-draw trees record q as the builder keeps draft rows (float32 log-probabilities): laws built on them agree
# with float64 formulas to about 1e-8, not to 1e-12.
DRAWN_TOLERANCE = 1e-7


def hand_flow(hand: lessons.HandTree) -> tuple[list[float], list[float], list[float]]:
    """P, m and X of every node by the docs' definitions, in plain Python from the written probabilities."""
    probs = hand.probs().tolist()
    tokens, parents = hand.tree.tokens.tolist(), hand.tree.parents.tolist()
    n = len(tokens)
    a = [1.0] + [probs[parents[v]][tokens[v]] for v in range(1, n)]
    big_p = [math.prod(a[u] for u in path_of(parents, v)) for v in range(n)]
    m = [sum(a[c] for c in range(1, n) if parents[c] == v) for v in range(n)]
    return big_p, m, [big_p[v] * (1 - m[v]) for v in range(n)]


def test_largest_x_is_the_argmax_of_p_times_one_minus_m():
    hand = lessons.largest_x_setting()
    _, _, x = hand_flow(hand)
    truth = LESSONS["largest-x"].truth()
    assert math.isclose(sum(x), 1.0, abs_tol=1e-12)  # flow is conserved
    assert truth.value == hand.labels[max(range(len(x)), key=x.__getitem__)]
    assert truth.bars.series["X(v)"] == pytest.approx(x, abs=1e-12)


def test_every_optimal_rule_has_e_l_equal_one_plus_c():
    big_p, _, _ = hand_flow(lessons.optimal_length_setting())
    truth = LESSONS["optimal-length"].truth()
    assert truth.value == pytest.approx(1 + sum(big_p[1:]), abs=1e-12)
    means, errors = truth.bars.series["E[L]"][1:], truth.bars.errors["E[L]"][1:]
    for mean, error in zip(means, errors):  # each rule's counted mean sits on 1 + C
        assert abs(mean - truth.value) < 4 * error


def test_greedy_follow_emits_the_autoregressive_greedy_tokens_the_tree_holds_plus_one():
    hand = lessons.greedy_setting()
    children = {(int(hand.tree.parents[v]), int(hand.tree.tokens[v])): v for v in range(1, hand.tree.num_nodes)}
    node, emitted = 0, []
    while True:  # walk the argmax of the toy target's row after each accepted prefix
        best = int(lessons.toy_logits(emitted).argmax())
        emitted.append(best)
        if (node, best) not in children:
            break
        node = children[(node, best)]
    truth = LESSONS["greedy-is-ar"].truth()
    assert truth.value == len(emitted) == 3
    facts = dict(truth.facts)
    assert facts["greedy follow emits"] == facts["autoregressive greedy, one token at a time"] == \
        "".join(lessons.TOY_WORDS[t] for t in lessons.toy_greedy(len(emitted)))


def test_a_drawn_node_is_accepted_with_one_minus_tv_and_a_fixed_guess_with_its_p():
    rows = lessons.coupling_setting()
    p, q = rows.p.tolist(), rows.q.tolist()
    truth = LESSONS["coupling"].truth()
    assert truth.value == pytest.approx(1 - 0.5 * sum(abs(a - b) for a, b in zip(p, q)), abs=DRAWN_TOLERANCE)
    assert dict(truth.facts)["the fixed guess is accepted with p(guess)"] == pytest.approx(p[q.index(max(q))])


def test_rrs_beats_one_plus_c_of_its_tree_yet_is_exact_over_the_draws_by_enumeration():
    rows = lessons.rrs_setting()
    p, q = rows.p.tolist(), rows.q.tolist()
    drawn = lessons.DRAWN
    truth = LESSONS["rrs-beats-1-plus-c"].truth()
    # one draw x: rrs accepts it with min(1, p/q); an exact-given-tree rule with p(x)
    assert truth.value == pytest.approx(1 + min(1.0, p[drawn] / q[drawn]), abs=DRAWN_TOLERANCE)
    assert truth.value > 1 + p[drawn] + 0.5
    # every tree the draw can make, weighted by q: the first emitted token follows p exactly
    enumerated = lessons.drawn_rounds(rows)
    assert [r.token for r in enumerated] == [t for t in range(len(q)) if q[t] > 0]
    for r in enumerated:
        assert r.rrs_length == pytest.approx(1 + min(1.0, p[r.token] / q[r.token]), abs=DRAWN_TOLERANCE)
        assert r.yardstick == pytest.approx(1 + p[r.token], abs=1e-12)
    mixture = sum(r.q * r.first_token for r in enumerated)
    assert mixture.tolist() == pytest.approx(p, abs=DRAWN_TOLERANCE)
    # ...while given this one tree it is no target sample: the bound's premise fails, so nothing is contradicted
    this = next(r for r in enumerated if r.token == drawn)
    assert 0.5 * float((this.first_token - rows.p).abs().sum()) > 0.5
    over_draws = dict(truth.facts)["over the draws: E[L] of rrs"]
    assert over_draws == pytest.approx(1 + sum(min(a, b) for a, b in zip(p, q)), abs=DRAWN_TOLERANCE)


def test_the_chi_square_rejects_the_naive_rule_whose_exits_follow_its_own_law_not_x():
    hand = lessons.naive_setting()
    big_p, m, x = hand_flow(hand)
    probs, q = hand.probs(), hand.tree.draft_logp.exp().tolist()
    tokens = hand.tree.tokens.tolist()
    # the naive rule at the root tries ' salt' then ' bread', each accepted with min(1, p/q), no residual
    stay = math.prod(1 - min(1.0, float(probs[0, tokens[c]]) / q[c]) for c in (1, 2))
    truth = LESSONS["naive-chi-square"].truth()
    assert truth.value == lessons.NAIVE_CHOICES[0]
    counted = truth.bars.series["naive_ratio (counted)"][0]
    se = math.sqrt(stay * (1 - stay) / lessons.SIMULATED_DRAWS)
    assert abs(counted - stay) < 4 * se and abs(counted - x[0]) > 20 * se
    assert truth.bars.series["X(v)"] == pytest.approx(x, abs=1e-12)
    assert dict(truth.facts)[next(k for k, _ in truth.facts if k.startswith("χ² p-value of the naive"))] < 1e-6


def test_the_bonus_is_p_without_the_exits_children_renormalised():
    hand = lessons.bonus_setting()
    _, m, _ = hand_flow(hand)
    ran = hand.vocab.index(lessons.BONUS_WORD)
    truth = LESSONS["bonus-token"].truth()
    assert truth.value == pytest.approx(float(hand.probs()[lessons.BONUS_NODE, ran]) / (1 - m[lessons.BONUS_NODE]),
                                        abs=1e-12)
    big_p, _, _ = hand_flow(hand)
    assert dict(truth.facts)["E[L] = 1 + C (the 1 is the bonus)"] == pytest.approx(1 + sum(big_p[1:]), abs=1e-12)


@pytest.mark.parametrize("key", list(LESSONS))
def test_every_lesson_accepts_its_own_truth_and_refuses_a_bad_prediction(key):
    found = LESSONS[key]
    truth = found.truth()
    assert found.answer.correct(found.answer.parse(truth.value), truth.value)
    if isinstance(found.answer, ChoiceAnswer):
        assert truth.value in found.answer.choices
        with pytest.raises(ValueError, match="must be one of"):
            found.answer.parse("none of these")
    else:
        assert found.answer.low <= float(truth.value) <= found.answer.high
        with pytest.raises(ValueError, match="must be a number"):
            found.answer.parse("many")
        with pytest.raises(ValueError, match="must lie in"):
            found.answer.parse(found.answer.high + 10)
    assert found.setting() is not None and 2 <= found.explanation.count(". ") + 1 <= 4
    assert truth.bars.marked is None or truth.bars.marked in truth.bars.labels


def test_every_lesson_of_the_issue_is_there():
    assert 6 <= len(LESSONS) <= 8
    assert set(LESSONS) >= {"largest-x", "optimal-length", "greedy-is-ar", "coupling", "rrs-beats-1-plus-c",
                            "naive-chi-square", "bonus-token"}
    assert torch.equal(lessons.toy_logits([1, 2]), lessons.toy_logits([1, 2]))  # a row is a function of its prefix
