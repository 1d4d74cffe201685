"""The reference verifier is the registry's rules through plain tensors: the same verdict, draw for draw.

Because the adapter hands the rule the very tree, draws and warped rows (no math of its own), the enumeration
proofs of tests/verify/test_exactness.py, test_sampled_exactness.py and test_mixed_exactness.py carry over to it;
the conformance suite then tests its output law (test_conformance.py).
"""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.sampling import make_generator, warp_logits
from tevcore.verify import reference
from tevcore.verify.registry import RULES
from tevcore.verify.verifiers import get_verifier

VOCAB = 30


def _round(builder: str, seed: int):
    generator = torch.Generator().manual_seed(seed)
    rows = torch.log_softmax(2.0 * torch.randn(3, VOCAB, generator=generator), -1)
    tree = parse_builder(builder)(5, rows, 8, 1.0, make_generator(seed))
    logits = 2.0 * torch.randn(tree.num_nodes, VOCAB, generator=generator)
    return tree, logits


def _plain(tree) -> dict:
    arguments = dict(parents=tree.parents, tokens=tree.tokens)
    if tree.draws is not None:
        draws = tree.draws
        proposals = torch.zeros(tree.num_nodes, VOCAB, dtype=torch.float64)
        proposals[draws.row_of >= 0] = draws.rows[draws.row_of[draws.row_of >= 0]]
        arguments.update(draw_parents=draws.parents, draw_children=draws.children, draw_fixed=draws.fixed,
                         proposals=proposals, draw_mode=draws.mode)
    return arguments


@pytest.mark.parametrize("rule,builder", [("tev", "best_first"), ("residual", "width:3,1"), ("chain", "best_first"),
                                          ("predraw", "mixed:3,2"), ("rrs", "sampled:3,2"),
                                          ("rrs", "mixed-wor:3,2"), ("block", "sampled:1,1,1")])
@pytest.mark.parametrize("top_k,top_p", [(None, None), (8, 0.9)])
def test_each_rule_through_the_reference_gives_the_registry_verdict(rule, builder, top_k, top_p):
    for seed in range(5):
        tree, logits = _round(builder, seed)
        shipped = get_verifier(rule)(tree, warp_logits(logits, 1.0, top_k, top_p), 1.0, make_generator(seed))
        path, bonus = reference.rule_verifier(rule)(logits, generator=make_generator(seed), temperature=1.0,
                                                    top_k=top_k, top_p=top_p, **_plain(tree))
        assert (path, bonus) == (shipped.path, shipped.bonus_token)


def test_the_default_runs_tev_on_a_fixed_tree_and_rrs_on_a_drawn_one():
    for builder, rule in (("best_first", "tev"), ("mixed:3,2", "rrs")):
        tree, logits = _round(builder, 3)
        assert reference.verify(logits, generator=make_generator(1), **_plain(tree)) == \
            reference.rule_verifier(rule)(logits, generator=make_generator(1), **_plain(tree))


def test_rules_declare_the_trees_the_registry_lets_them_run_on():
    assert reference.verify_tev.conformance_trees == tuple(reference.TREE_KINDS)
    assert reference.verify_rrs.conformance_trees == ("sampled", "mixed", "sampled chain")
    assert reference.verify_block.conformance_trees == ("sampled chain",)
    assert set(RULES) >= {"tev", "predraw", "residual", "chain", "rrs", "block"}


@pytest.mark.parametrize("change,message", [
    (dict(parents=[0, 0]), "node 0 must be the root"),
    (dict(draw_parents=[0], draw_children=[1]), "needs the proposal rows"),
    (dict(top_k=-1), "top_k must be an integer >= 0"),
])
def test_bad_input_is_a_one_line_value_error(change, message):
    arguments = dict(logits=torch.zeros(2, VOCAB), parents=[-1, 0], tokens=[1, 2], generator=make_generator(0))
    with pytest.raises(ValueError, match=message):
        reference.verify(**{**arguments, **change})
