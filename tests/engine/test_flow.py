"""target_flow against brute-force path products and the flow identities."""

import math

import pytest
import torch

from tevcore.engine.builders import best_first, chain
from tevcore.engine.flow import draft_path_probs, target_flow
from tevcore.engine.tree import DraftTree

VOCAB, DEPTH, K_MISSING = 12, 4, 3
TEMPERATURES = [0.0, 0.5, 1.0, 2.0]


def random_case(seed, budget):
    generator = torch.Generator().manual_seed(seed)
    logq = torch.log_softmax(2 * torch.randn(DEPTH, VOCAB, generator=generator), -1)
    tree = best_first(3, logq, budget)
    logits = 3 * torch.randn(tree.num_nodes, VOCAB, generator=generator)
    return tree, logits


def target_probs(logits, temperature):
    """Brute-force p(.|v) in float64; T = 0 is a point mass on the argmax."""
    logits = logits.double()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).double()
    return torch.softmax(logits / temperature, -1)


def subtree(tree, node):
    return [v for v in range(tree.num_nodes) if node in tree.path(v)]


CASES = [(0, 0), (1, 1), (2, 5), (3, 12), (4, 20), (5, 30), (6, 9), (7, 16)]  # (seed, budget)


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("seed, budget", CASES)
def test_flow_identities_and_brute_force(seed, budget, temperature):
    tree, logits = random_case(seed, budget)
    flow = target_flow(tree, logits, temperature, K_MISSING)
    p = target_probs(logits, temperature)
    n = tree.num_nodes
    X, P = flow.exit_mass, flow.path_prob
    assert X.shape == P.shape == (n,) and flow.temperature == temperature
    assert torch.isfinite(X).all() and (X >= 0).all()
    assert float(X.sum()) == pytest.approx(1.0, abs=1e-6)
    kids = tree.children()
    for v in range(n):
        edge = 1.0 if v == 0 else float(p[int(tree.parents[v]), int(tree.tokens[v])])
        brute_P = math.prod(float(p[int(tree.parents[u]), int(tree.tokens[u])]) for u in tree.path(v)[1:])
        assert float(flow.edge_prob[v]) == pytest.approx(edge, abs=1e-6)
        assert float(P[v]) == pytest.approx(brute_P, abs=1e-6)
        assert float(X[subtree(tree, v)].sum()) == pytest.approx(float(P[v]), abs=1e-6)
        child_mass = sum(float(p[v, int(tree.tokens[c])]) for c in kids[v])
        assert float(flow.child_mass[v]) == pytest.approx(child_mass, abs=1e-6)
    depth_weighted = float((X * (tree.depths.double() + 1)).sum())
    assert depth_weighted == pytest.approx(flow.expected_length, abs=1e-5)
    assert flow.expected_length == pytest.approx(1 + float(P[1:].sum()), abs=1e-12)
    assert flow.coverage == pytest.approx(float(P[1:].sum()), abs=1e-12)


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("seed, budget", CASES)
def test_missing_tokens_are_top_non_children(seed, budget, temperature):
    tree, logits = random_case(seed, budget)
    flow = target_flow(tree, logits, temperature, K_MISSING)
    p = target_probs(logits, temperature)
    mask = tree.child_token_mask(VOCAB)
    assert flow.missing_tokens.shape == flow.missing_probs.shape == (tree.num_nodes, K_MISSING)
    for v in range(tree.num_nodes):
        tokens = flow.missing_tokens[v].tolist()
        assert not mask[v, tokens].any(), f"node {v}: a child listed as missing"
        assert len(set(tokens)) == K_MISSING
        free = p[v].masked_fill(mask[v], -1.0)
        assert flow.missing_probs[v].tolist() == pytest.approx(free.topk(K_MISSING).values.tolist(), abs=1e-6)
        assert flow.missing_probs[v].tolist() == pytest.approx(p[v, tokens].tolist(), abs=1e-6)
        positive = [t for t, q in zip(tokens, p[v, tokens].tolist()) if q > 0]
        ranked = torch.argsort(free, descending=True).tolist()
        assert positive == ranked[: len(positive)]  # tokens with mass are exactly the top ones, in order


def test_greedy_flow_is_a_point_mass():
    tree, logits = random_case(4, 20)
    # make the greedy path follow the tree for two steps: root -> node a -> node b
    a = tree.children()[0][0]
    b = tree.children()[a][0] if tree.children()[a] else None
    logits[0, int(tree.tokens[a])] = 100.0
    if b is not None:
        logits[a, int(tree.tokens[b])] = 100.0
    flow = target_flow(tree, logits, 0.0)
    node = 0
    while True:  # first node whose argmax is not a child
        step = [c for c in tree.children()[node] if int(tree.tokens[c]) == int(logits[node].argmax())]
        if not step:
            break
        node = step[0]
    assert node != 0
    expected = torch.zeros(tree.num_nodes, dtype=torch.float64)
    expected[node] = 1.0
    assert torch.equal(flow.exit_mass, expected)
    assert set(torch.nonzero(flow.path_prob).flatten().tolist()) == set(tree.path(node))
    assert flow.expected_length == len(tree.path(node))


def test_deep_chain_stays_exact_in_log_space():
    depth, vocab = 200, 8
    logq = torch.log_softmax(torch.randn(depth, vocab, generator=torch.Generator().manual_seed(0)), -1)
    tree = chain(1, logq)
    assert tree.max_depth == depth
    logits = torch.full((tree.num_nodes, vocab), -9.0)  # off-path tokens: mass ~1e-4 each at T=1
    logits[torch.arange(depth), tree.tokens[1:]] = 0.0
    flow = target_flow(tree, logits, 1.0)
    on_path = (torch.arange(depth), tree.tokens[1:])
    # the flow normalises the rows in float64; from there on everything is exact
    lp = torch.log_softmax(logits.double(), -1)
    log_P = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(lp[on_path], 0)])
    assert torch.isfinite(flow.path_prob.log()).all() and torch.isfinite(flow.exit_mass).all()
    assert torch.allclose(flow.path_prob.log(), log_P, rtol=0, atol=1e-12)
    assert torch.allclose(flow.path_prob.log(), torch.cumsum(flow.edge_prob.log(), 0), rtol=0, atol=1e-12)
    # 1 - m ~ 9e-4 at inner nodes: relative accuracy, no cancellation against m
    free = lp.exp().masked_fill(tree.child_token_mask(vocab), 0.0).sum(-1)
    assert torch.allclose(flow.exit_mass, log_P.exp() * free, rtol=1e-9, atol=0)
    assert float(flow.exit_mass.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(flow.path_prob.log()[-1]) == pytest.approx(float(lp[on_path].sum()), abs=1e-12)


def test_near_one_child_mass_keeps_tiny_exit_mass():
    tree = DraftTree(tokens=torch.tensor([0, 1]), parents=torch.tensor([-1, 0]), draft_logp=torch.zeros(2))
    logits = torch.tensor([[-40.0, 0.0, -40.0], [0.0, 0.0, 0.0]])
    flow = target_flow(tree, logits, 1.0)
    # 1 - m(root) = 2 e^-40 / (1 + 2 e^-40): a naive 1 - m in float64 gives 0
    assert float(flow.exit_mass[0]) == pytest.approx(2 * math.exp(-40), rel=1e-5)
    assert float(flow.child_mass[0]) == 1.0


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_missing_k_shrinks_when_a_node_lacks_non_children(temperature):
    # the root holds 3 of the 4 tokens, so only token 3 can be missing there
    tree = DraftTree(tokens=torch.tensor([0, 0, 1, 2]), parents=torch.tensor([-1, 0, 0, 0]),
                     draft_logp=torch.zeros(4))
    logits = torch.randn(4, 4, generator=torch.Generator().manual_seed(3))
    flow = target_flow(tree, logits, temperature, missing_k=3)
    assert flow.missing_tokens.shape == flow.missing_probs.shape == (4, 1)
    assert flow.missing_tokens[0].tolist() == [3]
    p = target_probs(logits, temperature)
    assert flow.missing_probs[:, 0].tolist() == pytest.approx(p[torch.arange(4), flow.missing_tokens[:, 0]].tolist())
    full = DraftTree(tokens=torch.tensor([0, 0, 1, 2, 3]), parents=torch.tensor([-1, 0, 0, 0, 0]),
                     draft_logp=torch.zeros(5))
    assert target_flow(full, torch.zeros(5, 4), temperature).missing_tokens.shape == (5, 0)


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_flow_identities_hold_at_a_real_vocabulary(temperature):
    # fp32 log-softmax rows over ~49k tokens sum to 1 only within ~1e-5; the flow must not inherit that
    vocab = 49152
    generator = torch.Generator().manual_seed(5)
    tree = best_first(0, torch.log_softmax(torch.randn(3, vocab, generator=generator), -1), 6)
    logits = 4 * torch.randn(tree.num_nodes, vocab, generator=generator)
    flow = target_flow(tree, logits, temperature)
    assert float(flow.exit_mass.sum()) == pytest.approx(1.0, abs=1e-12)
    for v in range(tree.num_nodes):
        assert float(flow.exit_mass[subtree(tree, v)].sum()) == pytest.approx(float(flow.path_prob[v]), abs=1e-12)


@pytest.mark.parametrize(
    "shape, message",
    [((5, 12), "N\\+1"), ((7, 12), "N\\+1"), ((12,), "N\\+1"), ((6, 12, 1), "N\\+1"), ((6, 4), "outside the target vocabulary")],
)
def test_shape_errors(shape, message):
    tree, _ = random_case(2, 5)
    assert tree.num_nodes == 6
    with pytest.raises(ValueError, match=message):
        target_flow(tree, torch.zeros(shape), 1.0)


def test_bad_temperature():
    tree, logits = random_case(2, 5)
    with pytest.raises(ValueError, match="temperature"):
        target_flow(tree, logits, -1.0)


def test_draft_path_probs_multiply_down_each_path():
    half = math.log(0.5)
    tree = DraftTree(tokens=torch.tensor([1, 2, 3, 4]), parents=torch.tensor([-1, 0, 1, 0]),
                     draft_logp=torch.tensor([0.0, half, half, math.log(0.25)]))
    assert draft_path_probs(tree).tolist() == pytest.approx([1.0, 0.5, 0.25, 0.25])
