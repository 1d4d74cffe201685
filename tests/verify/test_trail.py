"""The trails of rrs and block: read off a verdict, they are what the verifier's own uniforms did, try by try."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.sampling import make_generator, uniform
from tevcore.verify.scored import scored_round
from tevcore.verify.trail import block_trail, rrs_trail
from tevcore.verify.verifiers import get_verifier
from verify_cases import seeded

VOCAB = 6  # small, so i.i.d. draws repeat a token and the first-try rule is exercised


def small_case(builder: str, seed: int):
    rows = torch.log_softmax(1.2 * torch.randn(4, VOCAB, generator=seeded("trail rows", seed)), -1)
    tree = parse_builder(builder)(2, rows, 20, 1.0, seeded("trail draws", builder, seed))
    logits = 1.2 * torch.randn(tree.num_nodes, VOCAB, generator=seeded("trail target", seed))
    return tree, logits


def replayed_walk(round_, seed: int) -> list[tuple[int, list[bool]]]:
    """The verifier's uniforms for `seed`, drawn the way its n = 1 walk draws them: per level, which tries pass."""
    tables, generator = round_.rrs, make_generator(seed)
    node, walk = 0, []
    for _ in range(round_.tree.max_depth):
        passed = (uniform((1, tables.table.shape[1]), generator, round_.device)[0] < tables.accept[node]).tolist()
        walk.append((node, passed))
        if not any(passed):
            break
        node = int(tables.table[node, passed.index(True)])
    return walk


@pytest.mark.parametrize("builder", ["sampled:3,3,2", "sampled-wor:3,2,2", "sampled:1,1,1"])
def test_trail_is_the_verifiers_walk_for_the_same_seed(builder):
    repeats = 0
    for seed in range(60):
        tree, logits = small_case(builder, seed)
        repeats += sum(len(kids) < len(tree.draws.at(node)[0]) for node, kids in enumerate(tree.children()))
        verdict = get_verifier("rrs")(tree, logits, 1.0, make_generator(seed))
        round_ = scored_round(tree, logits, 1.0)
        trail = rrs_trail(round_, verdict.path, verdict.bonus_token)
        assert trail.path == verdict.path and trail.exit_node == verdict.exit_node
        assert trail.bonus_token == verdict.bonus_token
        for node, passed in replayed_walk(round_, seed):
            steps = [step for step in trail.steps if step.node == node]
            first = passed.index(True) if any(passed) else len(steps)
            assert [step.accepted for step in steps] == [i == first for i in range(len(steps))]
            assert [step.draw for step in steps] == list(range(len(steps)))
            drawn, q = tree.draws.at(node)
            assert [(s.child, s.q) for s in steps] == list(zip(drawn, q))[:len(steps)]
        exits = [step for step in trail.steps if step.node == verdict.exit_node]
        assert len(exits) == len(tree.draws.at(verdict.exit_node)[0]) and not any(s.accepted for s in exits)
    if builder.startswith("sampled:3"):
        assert repeats > 0  # some node drew one token twice: the trail took its first try


def test_a_path_rrs_could_not_take_is_refused():
    tree, logits = small_case("sampled:3,3,2", 1)
    round_ = scored_round(tree, logits, 1.0)
    deep = next(node for node in range(tree.num_nodes) if int(tree.depths[node]) == 2)
    with pytest.raises(ValueError, match="was not drawn at node 0"):
        rrs_trail(round_, [0, deep], 0)
    with pytest.raises(ValueError, match="starts at the root"):
        rrs_trail(round_, [1], 0)
    first = int(tree.draws.at(0)[0][0])
    certain = logits.clone()
    certain[0] = -float("inf")
    certain[0, tree.tokens[first]] = 0.0  # the target takes the first draw's token for sure: rrs accepts it
    with pytest.raises(ValueError, match="cannot reject draw 0 at node 0"):
        rrs_trail(scored_round(tree, certain, 1.0), [0], 0)
    never = logits.clone()
    never[0, tree.tokens[first]] = -float("inf")  # the target never takes the first draw's token
    with pytest.raises(ValueError, match="cannot accept draw 0 at node 0"):
        rrs_trail(scored_round(tree, never, 1.0), [0, first], 0)


def test_block_trail_reads_the_verifiers_coins_from_the_chains_end_down_to_the_exit():
    exits = set()
    for seed in range(60):
        tree, logits = small_case("sampled:1,1,1", seed)
        verdict = get_verifier("block")(tree, logits, 1.0, make_generator(seed))
        round_ = scored_round(tree, logits, 1.0)
        trail = block_trail(round_, verdict.path, verdict.bonus_token)
        assert trail.path == verdict.path and trail.bonus_token == verdict.bonus_token
        exits.add(trail.exit_node)
        coins = uniform((1, tree.num_nodes - 1), make_generator(seed), round_.device)[0].tolist()
        for step in trail.steps:
            assert step.q == tree.draws.at(step.node - 1)[1][0]
            if step.node < trail.exit_node:
                assert step.stop_prob is None and step.outcome is None  # accepted with the block, coin unread
            else:
                assert step.outcome == (step.node == trail.exit_node)
                assert step.outcome == (coins[step.node - 1] < step.stop_prob)
        weights = [1.0]
        for step in trail.steps:  # w_i = min(1, w_{i-1} p/q), carried down the chain
            weights.append(min(1.0, weights[-1] * step.ratio))
            assert step.weight == pytest.approx(weights[-1], rel=1e-12)
    assert len(exits) >= 3  # the seeds exit at several depths: failures, a success and unread coins all occur


def test_a_path_block_could_not_take_is_refused():
    tree, logits = small_case("sampled:1,1,1", 2)
    round_ = scored_round(tree, logits, 1.0)
    with pytest.raises(ValueError, match="prefix"):
        block_trail(round_, [0, 2], 0)
    with pytest.raises(ValueError, match="prefix"):
        block_trail(round_, [0, 1, 2, 3, 4], 0)
    certain = logits.clone()
    last = tree.num_nodes - 1
    for node in range(1, last + 1):
        certain[node - 1] = -float("inf")
        certain[node - 1, tree.tokens[node]] = 0.0  # every chain token is certain: h_g = w_g = 1
    with pytest.raises(ValueError, match="cannot go past node 2"):
        block_trail(scored_round(tree, certain, 1.0), [0, 1], 0)
    never = logits.clone()
    never[0, tree.tokens[1]] = -float("inf")  # the target never takes x_1: w_1 = 0, so no coin can stop there
    with pytest.raises(ValueError, match="cannot stop at node 1"):
        block_trail(scored_round(tree, never, 1.0), [0, 1], 0)
    fixed = parse_builder("best_first")(2, torch.log_softmax(torch.randn(4, VOCAB), -1), 5, 1.0, None)
    with pytest.raises(ValueError, match="sampled tree"):
        block_trail(scored_round(fixed, torch.randn(fixed.num_nodes, VOCAB), 1.0), [0], 0)
