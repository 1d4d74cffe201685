"""rrs on mixed trees tries the drawn siblings first and reaches the fixed child through the final residual.

1. Exact enumeration of the SHIPPED law (`rule_law("rrs", ...)`: the tables'
   exits and residual bonus rows), every tree the builder can draw, rounds
   composed: the first tokens follow the target within 1e-12, both draw
   modes, several temperatures, budgets that cut the shape, and draft rows
   with ties at the top and tokens of q = 0. The earlier point-mass-first
   order (`rrs_fixed_first_law`) too: both orders are exact.
2. Per node, over the draws, the new order accepts at least as much as the
   old one on 240 random (p, q) pairs with one or two drawn siblings, i.i.d.
   and without replacement: both read off the package's laws
   (`node_acceptance`), and with one drawn sibling they equal the closed forms
   p(a) + sum_x min(p(x), (1 - p(a)) q'(x)) (old) and p(a) + sum_x min(p(x), q'(x))
   (new) to 1e-10 (float64 rounding after a near-total cancellation).
3. The trail of a verdict shows the tries in the new order, each with the
   probability its own proposal gave its token.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import numpy as np
import pytest
import torch

from test_exactness import _distance, compose_rounds, target_tokens_law
from test_sampled_exactness import START, VOCAB, _node_logits, _rows, enumerate_trees
from tevcore.engine.draft_rows import DraftRows
from tevcore.engine.sampling import make_generator, probs
from tevcore.engine.builder_specs import parse_builder
from tevcore.verify.laws import node_acceptance, rrs_fixed_first_law
from tevcore.verify.registry import rule_law
from tevcore.verify.scored import scored_round
from tevcore.verify.trail import rrs_trail

pytestmark = pytest.mark.usefixtures("one_thread_module")

TOLERANCE = 1e-12


def _tied_rows(context: tuple[int, ...]) -> DraftRows:
    """Draft rows with two tokens tied at the top (the fixed child is the first of them) and one token q never
    proposes (log q = -inf), the tie and the zero moving with the context."""
    shared = _rows(context).shared.clone()
    for depth in range(shared.shape[0]):
        top, zero = (context[-1] + depth) % VOCAB, (context[-1] + depth + 2) % VOCAB
        shared[depth] = torch.tensor([0.0] * VOCAB)
        shared[depth, (top + 1) % VOCAB] = 1.5
        shared[depth, top] = 1.5
        shared[depth, zero] = -float("inf")
        shared[depth] = torch.log_softmax(shared[depth], -1)
    return DraftRows(shared)


def shipped_tokens_law(builder: str, temperature: float, horizon: int, budget: int | None, rows_of=None,
                       law=None) -> dict[tuple[int, ...], float]:
    """The first `horizon` tokens' law when every round's tree is drawn by the builder and verified by the
    shipped rrs law (exits times the bonus rows at each exit)."""
    law = law or (lambda tree, logits, t: rule_law("rrs", tree, logits, t))

    @lru_cache(maxsize=None)
    def block_law(context: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], float], ...]:
        out: dict[tuple[int, ...], float] = defaultdict(float)
        rows = None if rows_of is None else rows_of(context)
        for weight, tree in enumerate_trees(builder, context, budget, temperature, rows):
            verdicts = law(tree, _node_logits(tree, context), temperature)
            tokens = tree.tokens.tolist()
            for node in range(tree.num_nodes):
                exit_prob = float(verdicts.exit_probs[node])
                if exit_prob <= 0:
                    continue
                prefix = tuple(tokens[u] for u in tree.path(node)[1:])
                for y, bonus in enumerate(verdicts.bonus_probs(node).tolist()):
                    if bonus > 0:
                        out[prefix + (y,)] += weight * exit_prob * bonus
        return tuple(out.items())

    return compose_rounds(block_law, START, horizon)


CASES = [("mixed:2,1", None, 2, 1.0, None), ("mixed-wor:3,1", None, 2, 0.6, None), ("mixed:3,2", 4, 2, 1.6, None),
         ("mixed-wor:3,2", 4, 2, 1.0, None), ("mixed:3,1", None, 2, 1.0, _tied_rows),
         ("mixed-wor:3,2", None, 2, 0.8, _tied_rows), ("mixed:2,2", None, 2, 0.0, None),
         ("mixed-wor:2,2", 3, 2, 0.0, _tied_rows)]


@pytest.mark.parametrize("builder,budget,horizon,temperature,rows_of", CASES)
def test_the_shipped_siblings_first_law_is_the_target(builder, budget, horizon, temperature, rows_of):
    worst, _ = _distance(shipped_tokens_law(builder, temperature, horizon, budget, rows_of),
                         target_tokens_law(temperature, VOCAB, START, horizon))
    print(f"rrs (siblings first) on {builder}, budget {budget}, T={temperature}, "
          f"{'tied rows' if rows_of else 'plain rows'}: max abs diff {worst:.2g}")
    assert worst <= TOLERANCE


@pytest.mark.parametrize("builder,temperature,rows_of", [("mixed:3,1", 1.0, None), ("mixed-wor:3,2", 0.8, _tied_rows)])
def test_the_old_point_mass_first_order_is_exact_too(builder, temperature, rows_of):
    worst, _ = _distance(shipped_tokens_law(builder, temperature, 2, None, rows_of, law=rrs_fixed_first_law),
                         target_tokens_law(temperature, VOCAB, START, 2))
    assert worst <= TOLERANCE


def test_the_enumerated_rows_hold_ties_and_zeros():
    """The tied rows reach trees whose fixed child is the first of two tied tokens and that never draw the token
    q leaves out."""
    trees = enumerate_trees("mixed-wor:3,2", START, None, 1.0, _tied_rows(START))
    top, zero = START[-1] % VOCAB, (START[-1] + 2) % VOCAB
    assert all(int(tree.tokens[tree.draws.at(0)[0][0]]) == top for _, tree in trees)
    assert all(zero not in tree.tokens[tree.children()[0]].tolist() for _, tree in trees)


# ---------------------------------------------------------------- 2. never below the old order, node by node

PAIRS = 60  # per (mode, siblings) case: 4 cases, 240 pairs


def _root_acceptance(builder: str, p_logits: torch.Tensor, q_logp: torch.Tensor, temperature: float,
                     law) -> float:
    """The acceptance at the root over the draws: sum over every tree the builder draws of its probability times
    the law's node acceptance there."""
    rows = DraftRows(q_logp[None, :])
    total = 0.0
    for weight, tree in enumerate_trees(builder, (0,), None, temperature, rows):
        logits = p_logits.expand(tree.num_nodes, -1)
        total += weight * float(node_acceptance(law(tree, logits, temperature))[0])
    return total


@pytest.mark.parametrize("mode", ["mixed", "mixed-wor"])
@pytest.mark.parametrize("drawn", [1, 2])
def test_siblings_first_never_accepts_less_than_point_mass_first(mode, drawn):
    generator = np.random.default_rng(52 + drawn + 10 * (mode == "mixed-wor"))
    gains = []
    for _ in range(PAIRS):
        vocab = int(generator.integers(3, 6))
        p_logits = torch.tensor(generator.normal(0, 1.5, vocab))
        q_logp = torch.log_softmax(torch.tensor(generator.normal(0, 1.5, vocab)), -1).float()
        temperature = float(generator.choice([0.5, 1.0, 1.5]))
        builder = f"{mode}:{drawn + 1}"
        new = _root_acceptance(builder, p_logits, q_logp, temperature, lambda *a: rule_law("rrs", *a))
        old = _root_acceptance(builder, p_logits, q_logp, temperature, rrs_fixed_first_law)
        assert new >= old - 1e-12
        if drawn == 1:  # the closed forms, from p and q' at the temperature
            p, q = probs(p_logits.double(), temperature), probs(q_logp.double(), temperature)
            a = int(q.argmax())
            q_rest = q.clone()
            q_rest[a] = 0.0
            q_rest /= q_rest.sum()
            # the law's residual is normalised after the sibling's rejection: where that leaves little mass, float64
            # rounding grows by 1 / (mass left), hence 1e-10 here against the enumerations' 1e-12
            assert new == pytest.approx(float(p[a] + torch.minimum(p, q_rest).sum()), abs=1e-10)
            assert old == pytest.approx(float(p[a] + torch.minimum(p, (1 - p[a]) * q_rest).sum()), abs=1e-10)
        gains.append(new - old)
    print(f"{mode} with {drawn} drawn sibling(s): gain mean {np.mean(gains):.4f}, max {np.max(gains):.4f}")
    assert max(gains) > 1e-2  # the orders differ: the comparison can fail


# ---------------------------------------------------------------- 3. the trail

def test_the_trail_tries_drawn_siblings_first_each_with_its_own_proposal():
    seen_bonus_via_fixed = False
    for seed in range(40):
        context = START + (seed % VOCAB,)
        tree = parse_builder("mixed-wor:3,2")(context[-1], _rows(context), None, 1.0, make_generator(seed))
        round_ = scored_round(tree, _node_logits(tree, context), 1.0)
        law = rule_law("rrs", tree, round_.logits, 1.0)
        exit_node = int(torch.multinomial(law.exit_probs.float(), 1, generator=make_generator(seed)))
        trail = rrs_trail(round_, tree.path(exit_node), 0)
        for node in {step.node for step in trail.steps}:
            steps = [step for step in trail.steps if step.node == node]
            flags = [step.fixed for step in steps]
            assert flags == sorted(flags)  # drawn tries before the fixed one
            q = tree.draws.proposal(node)
            fixed_token = int(tree.tokens[tree.draws.at(node)[0][0]])
            for step in steps:
                token = int(tree.tokens[step.child])
                expected = 1.0 if step.fixed else float(q[token] / (1 - q[fixed_token]
                                                                     - sum(float(q[int(tree.tokens[s.child])])
                                                                           for s in steps if not s.fixed
                                                                           and s.draw < step.draw)))
                assert step.proposal == pytest.approx(expected, rel=1e-9)
            seen_bonus_via_fixed |= steps[-1].fixed and steps[-1].accepted and len(steps) > 1
    assert seen_bonus_via_fixed  # some verdict reached the fixed child after rejecting its siblings


def test_node_acceptance_is_the_tries_own_and_agrees_with_the_exits_where_a_node_is_reached():
    """rrs's acceptance at a node comes from its tries, so it is known at a node the verdict never reaches (a
    depth-1 sibling that can never be accepted) and equals 1 - exit / reach wherever the node is reached."""
    from dataclasses import replace

    unreachable = 0
    for _, tree in enumerate_trees("mixed-wor:3,2", START, None, 1.0):
        law = rule_law("rrs", tree, _node_logits(tree, START), 1.0)
        by_exits = node_acceptance(replace(law, moves_on=None))
        reach = law.exit_probs.clone()
        for node in range(tree.num_nodes - 1, 0, -1):
            reach[int(tree.parents[node])] += reach[node]
        seen = reach > 1e-12
        assert torch.allclose(law.moves_on[seen], by_exits[seen], atol=1e-9)
        unreachable += int(((~seen) & (law.moves_on > 0)).sum())
    assert unreachable  # some node is never reached, yet its acceptance is known
