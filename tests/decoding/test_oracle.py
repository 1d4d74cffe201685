"""The oracle tree holds the top-B prefixes by target path probability: checked by brute force."""

from __future__ import annotations

import itertools

import pytest
import torch

from tevcore.engine.flow import target_flow
from tevcore.decoding.oracle import oracle_tree
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree


def _all_prefix_probs(target, context: list[int], depth: int, temperature: float) -> dict[tuple[int, ...], float]:
    """Target path probability of every prefix up to `depth`, from one full-tree forward."""
    vocab = target.vocab_size
    prefixes = [p for d in range(1, depth + 1) for p in itertools.product(range(vocab), repeat=d)]
    index = {(): 0} | {p: i + 1 for i, p in enumerate(prefixes)}
    tree = DraftTree(tokens=torch.tensor([context[-1]] + [p[-1] for p in prefixes]),
                     parents=torch.tensor([-1] + [index[p[:-1]] for p in prefixes]),
                     draft_logp=torch.zeros(len(prefixes) + 1))
    session = TargetSession(target)
    session.prefill(context)
    path_prob = target_flow(tree, session.score_tree(tree).logits.double(), temperature).path_prob
    return {p: float(path_prob[index[p]]) for p in prefixes}


@pytest.fixture
def small_vocab_target(tiny_target):
    """The tiny Llama cut to its first 7 tokens, so every prefix of depth 3 fits in one forward."""
    import copy

    target = copy.deepcopy(tiny_target)
    head = target.model.lm_head
    head.weight = torch.nn.Parameter(head.weight[:7].clone() * 4, requires_grad=False)
    head.out_features = 7
    target.model.config.vocab_size = 7
    return target


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_oracle_tree_is_the_top_b_prefixes(small_vocab_target, temperature):
    target, context, budget = small_vocab_target, [3, 1, 4, 1, 5], 6
    probs = _all_prefix_probs(target, context, 3, temperature)
    session = TargetSession(target)
    session.prefill(context)
    tree = oracle_tree(session, budget, temperature)
    assert tree.size == budget and session.cached_length == len(context) - 1
    assert tree.max_depth <= 3, "the brute force only reaches depth 3"
    path_prob = target_flow(tree, session.score_tree(tree).logits.double(), temperature).path_prob
    chosen = sorted(path_prob[1:].tolist())
    best = sorted(probs.values())[-budget:]
    assert chosen == pytest.approx(best, rel=1e-6)


def test_oracle_tree_at_t0_is_the_greedy_chain(tiny_target):
    session = TargetSession(tiny_target)
    session.prefill([5, 6, 7])
    tree = oracle_tree(session, 4, 0.0)
    assert tree.parents.tolist() == [-1, 0, 1, 2, 3]
    ids = [5, 6, 7]
    for _ in range(4):
        with torch.inference_mode():
            ids.append(int(tiny_target.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    assert tree.tokens[1:].tolist() == ids[3:]


def test_oracle_tree_refuses_a_negative_budget(tiny_target):
    session = TargetSession(tiny_target)
    session.prefill([5, 6, 7])
    with pytest.raises(ValueError, match="budget"):
        oracle_tree(session, -1, 1.0)
