"""Exact enumeration: rounds verified on warped rows (as the decoding loop and the generate door warp them) emit
the warped target law, T = 1 with top-k and top-p on; the expected law is built with transformers' own processors.

Each round's law is the registry's law of the rule on the tree over the warped rows (the laws
tests/verify/test_exactness.py and test_sampled_exactness.py prove equal to every branch of the rules); rounds are
composed into the law of the first two tokens and compared to the product of transformers-warped conditionals.
Fixed best-first trees on a 24-token vocabulary (top-k 20, top-p 0.9) and, where every draw can be enumerated,
sampled and mixed trees on 4 tokens (top-k 3, top-p 0.9). Without the warp, the same rounds miss the law.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from test_exactness import _distance, _seeded_logits
from test_sampled_exactness import START, VOCAB, _node_logits, enumerate_trees
from tevcore.engine.builders import best_first
from tevcore.engine.sampling import warp_logits
from tevcore.verify.registry import rule_law
from tevcore.verify.synthetic import compose_rounds, draft_rows, seeded_logits

pytestmark = pytest.mark.usefixtures("one_thread_module")

TOLERANCE = 1e-9  # float64 laws; the warpers run in float64 on these rows


def _hf_law(target, vocab: int, temperature: float, top_k: int, top_p: float, horizon: int = 2) -> dict:
    """Product of transformers-warped conditionals over every string (the law `generate` samples)."""
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k),
                                   TopPLogitsWarper(top_p)])

    def row(context):
        return warpers(None, target(context).clone()[None])[0].softmax(-1).tolist()

    law = {}
    for first, p1 in enumerate(row(START)):
        for second, p2 in enumerate(row(START + (first,))):
            law[(first, second)] = p1 * p2
    return law


def _composed(trees, logits_of, rule: str, temperature: float, top_k, top_p) -> dict:
    def block_law(context):
        out = defaultdict(float)
        for weight, tree in trees(context):
            warped = warp_logits(logits_of(tree, context), temperature, top_k, top_p)
            law = rule_law(rule, tree, warped, temperature)
            tokens = tree.tokens.tolist()
            for node in range(tree.num_nodes):
                if float(law.exit_probs[node]) > 0:
                    bonus = law.bonus_probs(node)
                    path = tuple(tokens[u] for u in tree.path(node)[1:])
                    for y in torch.nonzero(bonus > 0).flatten().tolist():
                        out[path + (y,)] += weight * float(law.exit_probs[node] * bonus[y])
        return tuple(out.items())

    return compose_rounds(block_law, START, 2)


WIDE = 24


def _wide_target(context):
    return seeded_logits("warped target", context, vocab=WIDE)


def _wide_tree(context):
    rows = draft_rows(_wide_target, lambda start, d: seeded_logits("warped draft", start, d, vocab=WIDE, scale=0.7),
                      context, 3)
    return [(1.0, best_first(context[-1], rows, 10))]


def _wide_logits(tree, context):
    tokens = tree.tokens.tolist()
    return torch.stack([_wide_target(context + tuple(tokens[u] for u in tree.path(v)[1:]))
                        for v in range(tree.num_nodes)])


@pytest.mark.parametrize("rule", ["tev", "residual", "predraw", "chain"])
def test_fixed_trees_emit_the_warped_law_at_top_k_20_top_p_09(rule):
    expected = _hf_law(_wide_target, WIDE, 1.0, 20, 0.9)
    worst, _ = _distance(_composed(_wide_tree, _wide_logits, rule, 1.0, 20, 0.9), expected)
    assert sum(p == 0 for p in expected.values()) > WIDE  # the warpers cut real mass
    assert worst <= TOLERANCE, f"{rule}: max abs diff {worst:.3g}"


@pytest.mark.parametrize("builder", ["sampled:2,1", "sampled-wor:2,1", "mixed:3,1"])
def test_drawn_trees_with_rrs_emit_the_warped_law(builder):
    def trees(context):
        return enumerate_trees(builder, context, None, 1.0)

    def logits_of(tree, context):
        return _node_logits(tree, context)

    expected = _hf_law(lambda context: _seeded_logits("target", context, vocab=VOCAB), VOCAB, 1.0, 3, 0.9)
    worst, _ = _distance(_composed(trees, logits_of, "rrs", 1.0, 3, 0.9), expected)
    assert sum(p == 0 for p in expected.values()) >= VOCAB
    assert worst <= TOLERANCE, f"rrs on {builder}: max abs diff {worst:.3g}"


def test_without_the_warp_the_rounds_miss_the_warped_law():
    expected = _hf_law(_wide_target, WIDE, 1.0, 20, 0.9)
    _, tv = _distance(_composed(_wide_tree, _wide_logits, "tev", 1.0, None, None), expected)
    assert tv > 0.05
