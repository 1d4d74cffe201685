"""The on-demand rrs and block tables against a straightforward eager reference on random sampled trees.

The reference below computes every node's whole acceptance row and residual
(and every block stop probability) up front, one node and one try at a time,
as docs/sampled-trees.md states the rules, and decides a verdict from those
full tables with the same uniforms and the same bonus draw as the shipped
rules. The shipped tables compute only the entries a verdict reads; they
must give the same numbers (to 1e-12) and, for the same generator, the same
path and bonus.
"""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import make_generator, masked_draws, probs, uniform
from tevcore.verify.ratio_tables import BlockTables, RrsTables
from tevcore.verify.verifiers import get_verifier
from verify_cases import seeded

VOCAB = 64
CASES = [("rrs", "sampled:4,3,2"), ("rrs", "sampled-wor:4,3,2"), ("rrs", "sampled:1,1,1,1,1"),
         ("block", "sampled:1,1,1,1,1")]


def random_case(builder: str, seed: int, temperature: float):
    """A sampled tree over random drafter rows and random target logits that half agree with the draws."""
    rows = torch.log_softmax(2.0 * torch.randn(5, VOCAB, generator=seeded("rows", builder, seed)), -1)
    tree = parse_builder(builder)(3, rows, 24, temperature, seeded("draws", builder, seed))
    logits = 2.0 * torch.randn(tree.num_nodes, VOCAB, generator=seeded("target", builder, seed))
    agree = torch.rand(tree.num_nodes, generator=seeded("agree", builder, seed)) < 0.5
    for node, kids in enumerate(tree.children()):
        for kid in kids:
            logits[node, tree.tokens[kid]] += 2.0 * float(agree[node])
    return tree, logits


def reference_rrs(tree, logits, temperature):
    """Every node's acceptance row and its residual after all its draws, eagerly, node by node."""
    draws = tree.draws
    width = max(1, max(len(draws.at(v)[0]) for v in range(tree.num_nodes)))
    accept = torch.zeros(tree.num_nodes, width, dtype=torch.float64)
    residual = {}
    for node in range(tree.num_nodes):
        children = draws.at(node)[0]
        if not children:
            continue
        q, r = draws.proposal(node), probs(logits[node].double(), temperature)
        removed = []
        for i, child in enumerate(children):
            token = int(tree.tokens[child])
            q_i = q.clone()
            if draws.mode == "wor":
                q_i[removed] = 0.0
                q_i = q_i / q_i.sum()
            accept[node, i] = min(1.0, float(r[token] / q_i[token]))
            leftover = (r - q_i).clamp_min(0.0)
            if leftover.sum() > 0:
                r = leftover / leftover.sum()
            removed.append(token)
        residual[node] = r
    return accept, residual


def reference_block(tree, logits, temperature):
    """Stop probabilities h_1..h_g and the residual at chain nodes 0..g-1, eagerly."""
    g, q_rows = tree.num_nodes - 1, [tree.draws.proposal(i) for i in range(tree.num_nodes - 1)]
    p = [probs(logits[i].double(), temperature) for i in range(tree.num_nodes)]
    w = [1.0]
    for i in range(1, g + 1):
        token = int(tree.tokens[i])
        w.append(min(1.0, w[-1] * float(p[i - 1][token] / q_rows[i - 1][token])))
    leftover = [(w[i] * p[i] - q_rows[i]).clamp_min(0.0) for i in range(g)]
    stops = []
    for i in range(1, g):
        mass = float(leftover[i].sum())
        stops.append(mass / (mass + 1.0 - w[i]) if mass + 1.0 - w[i] > 0 else 0.0)
    stops.append(w[g])
    # an empty residual belongs to an exit of probability 0 (h = 0 there): a zero row
    return torch.tensor(stops, dtype=torch.float64), {i: leftover[i] / max(float(leftover[i].sum()), 1e-300)
                                                      for i in range(g)}


def reference_verdict(verifier, tree, logits, temperature, generator):
    """(exit, bonus) from the full reference tables, drawing uniforms and the bonus as the shipped rules do."""
    if verifier == "block":
        stops, residual = reference_block(tree, logits, temperature)
        g = tree.num_nodes - 1
        success = uniform((1, g), generator, torch.device("cpu"))[0] < stops
        node = max([i + 1 for i in range(g) if success[i]], default=0)
    else:
        accept, residual = reference_rrs(tree, logits, temperature)
        node = 0
        for _ in range(tree.max_depth):
            tries = tree.draws.at(node)[0]
            accepted = (uniform((1, accept.shape[1]), generator, torch.device("cpu"))[0] < accept[node]).tolist()
            if True not in accepted:
                break
            node = tries[accepted.index(True)]
    row = residual.get(node)
    if row is not None:
        return node, int(masked_draws(row.log(), 1.0, row <= 0, generator, 1)[0])
    banned = torch.zeros(VOCAB, dtype=torch.bool)
    banned[tree.tokens[1:][tree.parents[1:] == node]] = True
    return node, int(masked_draws(logits[node], temperature, banned, generator, 1)[0])


@pytest.mark.parametrize("verifier,builder", CASES)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_tables_equal_the_eager_reference(verifier, builder, temperature):
    for seed in range(4):
        tree, logits = random_case(builder, seed, temperature)
        edge = target_flow(tree, logits, temperature, missing_k=0).edge_prob
        if verifier == "block":
            stops, residual = reference_block(tree, logits, temperature)
            tables = BlockTables(tree, logits, temperature, edge)
            assert torch.allclose(tables.stops(), stops, rtol=0, atol=1e-12)
        else:
            accept, residual = reference_rrs(tree, logits, temperature)
            tables = RrsTables(tree, logits, temperature, edge)
            assert torch.allclose(tables.accept, accept, rtol=0, atol=1e-12)
        shipped = tables.residuals()
        assert shipped.keys() == residual.keys()
        for node, row in residual.items():
            assert torch.allclose(shipped[node], row, rtol=0, atol=1e-12)


@pytest.mark.parametrize("verifier,builder", CASES)
def test_verdicts_equal_the_eager_reference_for_the_same_generator(verifier, builder):
    verify = get_verifier(verifier)
    exits = set()
    for seed in range(6):
        tree, logits = random_case(builder, seed, 1.0)
        for draw in range(25):
            verdict = verify(tree, logits, 1.0, make_generator(100 * seed + draw))
            expected = reference_verdict(verifier, tree, logits, 1.0, make_generator(100 * seed + draw))
            assert (verdict.exit_node, verdict.bonus_token) == expected
            assert verdict.path == tree.path(expected[0])
            exits.add(tree.depths[verdict.exit_node].item())
    assert len(exits) >= 3  # the verdicts reached several depths: rejections and acceptances both happened

