"""Loss terms on tiny inputs, against hand computation from the definitions."""

from __future__ import annotations

import math

import pytest
import torch

from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.train.losses import anchor_loss, distill_loss, tree_loss, tree_objective, tree_weights
from tevcore.engine.tree import DraftTree


def test_distill_loss_is_soft_cross_entropy_summed_over_depths_and_averaged_over_anchors():
    logq = torch.log_softmax(torch.randn(2, 3, 10), -1)
    ids = torch.randint(0, 10, (2, 3, 4))
    probs = torch.rand(2, 3, 4)
    probs[1, 2] = 0.0  # past the end of its sequence: no teacher
    expected = sum(-(probs[b, k] * logq[b, k, ids[b, k]]).sum() for b in range(2) for k in range(3)) / 2
    assert torch.allclose(distill_loss(logq, ids, probs), expected)


def _tree() -> DraftTree:
    # root -> 1 (token 4) -> 3 (token 6); root -> 2 (token 5)
    return DraftTree(tokens=torch.tensor([0, 4, 5, 6]), parents=torch.tensor([-1, 0, 0, 1]),
                     draft_logp=torch.tensor([0.0, -0.1, -0.2, -0.3]))


def _logits() -> torch.Tensor:
    torch.manual_seed(3)
    logits = torch.randn(4, 8)
    logits[0, 5] = -30.0  # edge root -> token 5 far below the floor
    return logits


def test_path_weights_are_products_of_floored_edge_probabilities():
    tree, logits = _tree(), _logits()
    p = torch.softmax(logits.double(), -1)
    alpha = 1e-4
    a = {1: p[0, 4], 2: p[0, 5], 3: p[1, 6]}
    expected = torch.tensor([0.0, max(a[1], alpha), max(a[2], alpha), max(a[1], alpha) * max(a[3], alpha)])
    weights = tree_weights(tree, logits, 1.0, "path", alpha)
    assert float(a[2]) < alpha
    assert torch.allclose(weights.double(), expected, rtol=1e-5)


def test_exit_weights_are_exit_mass_times_depth():
    tree, logits = _tree(), _logits()
    flow = target_flow(tree, logits, 1.0)
    weights = tree_weights(tree, logits, 1.0, "exit", 1e-4)
    assert torch.allclose(weights[1:].double(), (flow.exit_mass * tree.depths)[1:], rtol=1e-5)
    assert weights[0] == 0


def test_weights_reject_an_unknown_kind():
    with pytest.raises(ValueError, match="tree weight kind"):
        tree_weights(_tree(), _logits(), 1.0, "both", 1e-4)


def test_tree_loss_sums_weighted_draft_log_probs_at_each_nodes_depth():
    logq = torch.log_softmax(torch.randn(2, 5, requires_grad=True), -1)
    draft_index = torch.full((8,), -1)
    draft_index[3:8] = torch.arange(5)  # draft vocab = target tokens 3..7
    weights = torch.tensor([0.0, 0.5, 0.25, 0.125])
    loss = tree_loss(logq, _tree(), weights, draft_index)
    expected = -(0.5 * logq[0, 1] + 0.25 * logq[0, 2] + 0.125 * logq[1, 3])
    assert torch.allclose(loss, expected)
    loss.backward()  # gradients flow into q only; the weights are plain numbers


def test_tree_loss_on_a_best_first_tree_matches_the_definition():
    logq = torch.log_softmax(torch.randn(3, 8), -1)
    tree = best_first(0, logq, 6)
    logits = torch.randn(tree.num_nodes, 8)
    weights = tree_weights(tree, logits, 1.0, "path", 1e-4)
    loss = tree_loss(logq, tree, weights, torch.arange(8))
    manual = -sum(float(weights[v]) * float(logq[tree.depths[v] - 1, tree.tokens[v]]) for v in range(1, tree.num_nodes))
    assert math.isclose(float(loss), manual, rel_tol=1e-5)


def test_flow_loss_fits_each_prefixs_next_row_to_the_target_row_weighted_by_P():
    logq = torch.log_softmax(torch.randn(2, 5), -1)
    draft_index = torch.full((8,), -1)
    draft_index[torch.tensor([7, 3, 5, 4, 6])] = torch.arange(5)  # draft column j = target token [7,3,5,4,6][j]
    tree, logits = _tree(), _logits()
    p = torch.softmax(logits.double(), -1)
    P = target_flow(tree, logits, 1.0).path_prob
    columns = [7, 3, 5, 4, 6]
    # prefixes above the last depth (2): the root (row 0) and nodes 1, 2 (row 1); node 3 sits at depth 2
    expected = sum(-float(P[v]) * sum(float(p[v, t]) * float(logq[row, j]) for j, t in enumerate(columns))
                   for v, row in ((0, 0), (1, 1), (2, 1)))
    loss = tree_objective(logq, tree, logits, "flow", 1.0, 1e-4, draft_index)
    assert math.isclose(float(loss), expected, rel_tol=1e-5)


def test_flow_loss_holds_the_path_loss_plus_the_tokens_the_tree_lacked():
    logq = torch.log_softmax(torch.randn(2, 8), -1)
    tree, logits = _tree(), _logits()
    flow = tree_objective(logq, tree, logits, "flow", 1.0, 1e-4, torch.arange(8))
    exact_path = tree_loss(logq, tree, tree_weights(tree, logits, 1.0, "path", 1e-12), torch.arange(8))
    p = torch.softmax(logits.double(), -1)
    P = target_flow(tree, logits, 1.0).path_prob
    children = {0: {4, 5}, 1: {6}, 2: set()}
    lacked = sum(-float(P[v]) * float(p[v, t]) * float(logq[int(tree.depths[v]), t])
                 for v in children for t in range(8) if t not in children[v])
    assert math.isclose(float(flow), float(exact_path) + lacked, rel_tol=1e-5)


def test_the_hard_anchor_loss_is_one_hot_cross_entropy_on_the_greedy_token_of_every_depth():
    # 2 anchors x 2 depths, a draft vocabulary of 5; the stored rows are sorted, so column 0 is the greedy token
    logq = torch.log_softmax(torch.tensor([[[0.1, 2.0, -1.0, 0.5, 0.0], [1.0, 0.0, 0.3, -0.2, 0.7]],
                                           [[0.0, 0.0, 3.0, 0.1, -1.0], [0.4, 0.9, 0.0, 0.0, 0.2]]]), -1)
    ids = torch.tensor([[[1, 3, 0], [4, 0, 2]], [[2, 1, 0], [0, 0, 0]]])
    probs = torch.tensor([[[0.6, 0.3, 0.1], [0.5, 0.4, 0.0]], [[0.9, 0.05, 0.05], [0.0, 0.0, 0.0]]])
    # anchor 1's depth 2 is past the end of its sequence: no greedy token, nothing added
    expected = -(logq[0, 0, 1] + logq[0, 1, 4] + logq[1, 0, 2]) / 2
    assert torch.allclose(anchor_loss("hard", logq, ids, probs), expected)
    assert torch.allclose(anchor_loss("soft", logq, ids, probs), distill_loss(logq, ids, probs))
    with pytest.raises(ValueError, match="anchor loss"):
        anchor_loss("medium", logq, ids, probs)


def test_per_node_normalisation_divides_each_anchors_tree_term_by_its_node_count():
    tree, logits = _tree(), _logits()
    logq = torch.log_softmax(torch.randn(2, 8), -1)
    index = torch.arange(8)
    p = torch.softmax(logits.double(), -1)
    alpha = 1e-4
    a1, a2, a3 = max(float(p[0, 4]), alpha), max(float(p[0, 5]), alpha), max(float(p[1, 6]), alpha)
    summed = -(a1 * float(logq[0, 4]) + a2 * float(logq[0, 5]) + a1 * a3 * float(logq[1, 6]))
    per_anchor = tree_objective(logq, tree, logits, "path", 1.0, alpha, index, "anchor")
    per_node = tree_objective(logq, tree, logits, "path", 1.0, alpha, index, "node")
    assert math.isclose(float(per_anchor), summed, rel_tol=1e-5)
    assert math.isclose(float(per_node), summed / 3, rel_tol=1e-5)  # three nodes besides the root
    with pytest.raises(ValueError, match="tree norm"):
        tree_objective(logq, tree, logits, "path", 1.0, alpha, index, "tree")
