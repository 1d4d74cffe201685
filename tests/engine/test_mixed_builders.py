"""Mixed builders: each node's top-1 child fixed (a point-mass draw), its siblings drawn from q without it.

Shape, budget and draw record; the proposal of every try; traces that keep
the fixed flags; the pairings the registry allows and the one-line refusals.
"""

import pytest
import torch

from tevcore.config import DecodeConfig
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.draws import DrawRecord
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, read_trace, write_trace
from tevcore.engine.sampling import make_generator, probs
from tevcore.verify.trail import rrs_trail
from tevcore.verify.scored import scored_round
from tevcore.engine.tree import DRAWN, DRAWN_CHAIN
from tevcore.verify.registry import RULES
from tevcore.verify.verifiers import check_pairing, get_verifier, rules_for
from test_sampled_builders import assert_edited_trace_is_refused

ROOT, VOCAB = 7, 12


def rows(seed, depth=3, sharp=1.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.log_softmax(sharp * torch.randn(depth, VOCAB, generator=generator), -1)


@pytest.mark.parametrize("name", ["mixed:3,2,1", "mixed-wor:3,2,1", "mixed:1,1,1", "mixed-wor:4,1", "mixed:5,3"])
@pytest.mark.parametrize("seed", range(6))
def test_shape_budget_and_draw_record(name, seed):
    logq, budget, temperature = rows(seed, sharp=0.5), 9, 0.8
    tree = parse_builder(name)(ROOT, logq, budget, temperature, make_generator(seed))
    widths = [int(w) for w in name.split(":")[1].split(",")]
    draws = tree.draws
    assert tree.sampled and draws.mixed and tree.size <= budget and tree.max_depth <= len(widths)
    assert draws.mode == ("wor" if "wor" in name else "iid")
    counts = torch.bincount(draws.parents, minlength=tree.num_nodes).tolist()
    placed = 0
    for node in range(tree.num_nodes):  # breadth-first: a node makes K_d children (with repeats), or what fits
        depth = int(tree.depths[node])
        if depth < len(widths) and counts[node]:
            assert counts[node] == min(widths[depth], budget - placed)
        placed += len(tree.children()[node])
        children, q = draws.at(node)
        if not children:
            continue
        expected = probs(logq[depth].double(), temperature)
        top = int(expected.argmax())
        assert torch.allclose(draws.proposal(node), expected)
        assert draws.fixed_at(node) == [True] + [False] * (len(children) - 1)
        assert int(tree.tokens[children[0]]) == top  # the fixed child is q's top-1 ...
        assert top not in tree.tokens[children[1:]].tolist()  # ... and no drawn sibling repeats it
        assert q == pytest.approx([float(expected[int(tree.tokens[c])]) for c in children])
        assert tree.draft_logp[children].tolist() == pytest.approx(torch.tensor(q).log().tolist(), abs=1e-6)
        if draws.mode == "wor":
            assert len(set(children)) == len(children)


def test_zero_temperature_keeps_the_fixed_child_alone():
    """At T = 0 q is a point mass: nothing is left to draw beside the top-1, so a mixed tree is the argmax chain."""
    logq = rows(5)
    tree = parse_builder("mixed:3,3,3")(ROOT, logq, 20, 0.0, make_generator(0))
    assert tree.tokens[1:].tolist() == logq.argmax(-1).tolist() and tree.parents.tolist() == [-1, 0, 1, 2]
    assert tree.draws.fixed.tolist() == [True, True, True]


def test_proposal_of_each_try():
    """Try 0 of a mixed node is the point mass on q's top-1; a drawn try is q without it (and, without
    replacement, without the earlier draws), renormalised."""
    for name in ("mixed:4", "mixed-wor:4"):
        tree = parse_builder(name)(ROOT, rows(3, sharp=0.3), None, 1.0, make_generator(1))
        children, _ = tree.draws.at(0)
        q = tree.draws.proposal(0)
        tokens = tree.tokens[children].tolist()
        point = tree.draws.proposal_of_try(0, 0, tree.tokens)
        assert point[tokens[0]] == 1.0 and float(point.sum()) == 1.0
        for i in range(1, len(children)):
            removed = tokens[:i] if name == "mixed-wor:4" else tokens[:1]
            expected = q.clone()
            expected[removed] = 0.0
            assert torch.allclose(tree.draws.proposal_of_try(0, i, tree.tokens), expected / expected.sum())


def test_plain_sampled_trees_are_unchanged():
    tree = parse_builder("sampled:3,2")(ROOT, rows(2), 8, 1.0, make_generator(1))
    assert not tree.draws.mixed and "fixed" not in tree.draws.to_dict()
    assert torch.equal(tree.draws.proposal_of_try(0, 1, tree.tokens), tree.draws.proposal(0))


def _mixed_record(verifier="rrs", builder="mixed:3,2"):
    tree = parse_builder(builder)(ROOT, rows(3, sharp=0.3), 8, 1.0, make_generator(2))
    logits = torch.randn(tree.num_nodes, VOCAB, generator=torch.Generator().manual_seed(1))
    flow = target_flow(tree, logits, 1.0, missing_k=0)
    verdict = get_verifier(verifier)(tree, logits, 1.0, make_generator(3), flow=flow)
    emitted = tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token]
    record = RoundRecord(index=0, proposer="test", builder=builder, budget=8, temperature=1.0, context_length=3,
                         tree=tree, flow=flow, token_texts=[str(t) for t in tree.tokens.tolist()],
                         missing_texts=[[] for _ in range(tree.num_nodes)], verifier=verifier, path=verdict.path,
                         exit_node=verdict.exit_node, bonus_token=verdict.bonus_token, emitted_tokens=emitted)
    return record, logits


def test_trace_keeps_the_fixed_flags_and_the_trail_shows_them(tmp_path):
    record, logits = _mixed_record()
    path = write_trace(tmp_path / "m.jsonl", [record])
    back = read_trace(path).rounds[0].tree
    assert back.draws.to_dict() == record.tree.draws.to_dict() and back.draws.fixed.tolist() == \
        record.tree.draws.fixed.tolist() and back.draws.mixed
    trail = rrs_trail(scored_round(record.tree, logits, 1.0), record.path, record.bonus_token)
    fixed_children = set(record.tree.draws.children[record.tree.draws.fixed].tolist())
    assert trail.steps and all(step.fixed == (step.child in fixed_children and step.draw == 0) for step in trail.steps)
    root = [step for step in trail.steps if step.node == 0]
    assert not root[0].fixed  # the root's drawn siblings are tried first, its fixed child last
    assert all(step.proposal == 1.0 for step in trail.steps if step.fixed)
    assert trail.path == record.path


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["draws"]["fixed"].__setitem__(0, False) or d["draws"]["fixed"].__setitem__(1, True),
     "node 0's fixed children must come before its drawn ones"),
    (lambda d: d["draws"].__setitem__("fixed", [True]), "draws need one fixed flag per draw"),
])
def test_corrupt_fixed_flags_in_a_trace_are_one_line_errors(tmp_path, edit, message):
    record, _ = _mixed_record()
    assert_edited_trace_is_refused(tmp_path / "m.jsonl.gz", record, edit, message)


def test_a_drawn_sibling_cannot_repeat_the_fixed_child():
    parents, children = torch.tensor([-1, 0]), torch.tensor([1, 1])
    with pytest.raises(ValueError, match="drew one of its fixed children again"):
        DrawRecord("iid", torch.tensor([0, 0]), children, torch.tensor([0.5, 0.5]),
                   fixed=torch.tensor([True, False])).check_tree(parents, torch.tensor([0.0, 0.5]).log())


def test_a_fixed_child_must_be_its_nodes_top_1_of_q():
    parents = torch.tensor([-1, 0, 0])
    logq = torch.tensor([0.0, 0.2, 0.5]).log()
    with pytest.raises(ValueError, match="node 0's fixed child has less q than a drawn sibling"):
        DrawRecord("iid", torch.tensor([0, 0]), torch.tensor([1, 2]), torch.tensor([0.2, 0.5]),
                   fixed=torch.tensor([True, False])).check_tree(parents, logq)
    DrawRecord("iid", torch.tensor([0, 0]), torch.tensor([2, 1]), torch.tensor([0.5, 0.2]),
               fixed=torch.tensor([True, False])).check_tree(parents, logq)


def test_builder_traits_and_pairings():
    """A mixed family's trees are drawn but never a drawn chain (a mixed:1,1,1 chain holds only fixed children),
    and a realised mixed chain does not show DRAWN_CHAIN either: the registry pairs every rule but block."""
    made = parse_builder("mixed:1,1,1")
    assert made.sampled and made.traits == frozenset({DRAWN}) and made.depth == 3 and made.shape.fixed_top1
    assert parse_builder("sampled:1,1,1").traits == frozenset({DRAWN, DRAWN_CHAIN})
    assert not parse_builder("sampled:1,1,1").shape.fixed_top1
    chain = parse_builder("mixed:1,1,1")(ROOT, rows(1), 8, 1.0, make_generator(0))
    assert chain.size == 3 and chain.draws.fixed.all() and chain.traits == frozenset({DRAWN})
    every_but_block = [name for name in RULES if name != "block"]
    assert rules_for(parse_builder("mixed-wor:3,2")) == every_but_block == rules_for(chain)
    for verifier in every_but_block:
        check_pairing(verifier, parse_builder("mixed:2,1,1"))


def test_block_is_refused_on_mixed_trees_in_one_line():
    with pytest.raises(ValueError, match="verifier block verifies a chain drawn one draw per node; the trees of "
                                         "builder 'mixed:1,1,1' are not a chain drawn one draw per node") as err:
        DecodeConfig(builder="mixed:1,1,1", verifier="block")
    assert "\n" not in str(err.value)


def test_the_foil_runs_on_mixed_trees_as_on_every_tree():
    """The registry's one answer: the foil runs on every tree (its entry says why it is not exact on drawn and
    mixed trees); nothing refuses it on a mixed builder."""
    config = DecodeConfig(builder="mixed:1,1,1", verifier="naive_ratio")
    assert config.builder.name == "mixed:1,1,1"
    assert "mixed tree" in RULES["naive_ratio"].where and "mixed tree" in RULES["naive_ratio"].on_drawn
    tree = parse_builder("mixed:3,2")(ROOT, rows(3, sharp=0.3), 8, 1.0, make_generator(2))
    verdict = get_verifier("naive_ratio")(tree, torch.randn(tree.num_nodes, VOCAB), 1.0, make_generator(0))
    assert verdict.path[0] == 0


def test_block_refuses_a_mixed_chain_at_verify_time_too():
    tree = parse_builder("mixed:1,1,1")(ROOT, rows(1), 8, 1.0, make_generator(0))
    with pytest.raises(ValueError, match="this round's tree is not a chain drawn one draw per node"):
        get_verifier("block")(tree, torch.randn(tree.num_nodes, VOCAB), 1.0, make_generator(0))


@pytest.mark.parametrize("builder,message", [
    ("mixed:0", r"builder mixed:0: the children per node at each depth \(the top-1 fixed\) must be positive"),
    ("mixed-wor:x", "like 'mixed-wor:3,2,1'"),
    ("mixed:", "like 'mixed:3,2,1'"),
    ("mixd:2", "unknown builder 'mixd:2'"),
])
def test_bad_mixed_names(builder, message):
    with pytest.raises(ValueError, match=message):
        DecodeConfig(builder=builder)


@pytest.mark.parametrize("builder", ["mixed:4,2", "mixed-wor:4,2", "sampled-wor:3,2", "policy@sharp0.99:3,2",
                                     "mixed@qt0.5:3,2"])
def test_each_try_s_proposal_value_from_the_recorded_q_is_its_row_s(builder):
    """`proposal_prob_of_try` (from the recorded q alone, what a trace keeps) equals the row `proposal_of_try`
    builds, at the drawn token, for every draw of every node."""
    tree = parse_builder(builder)(ROOT, rows(5, sharp=0.3), 12, 1.0, make_generator(4))
    draws, checked = tree.draws, 0
    for node in range(tree.num_nodes):
        children, _ = draws.at(node)
        for i, child in enumerate(children):
            row = draws.proposal_of_try(node, i, tree.tokens)
            assert draws.proposal_prob_of_try(node, i) == pytest.approx(float(row[tree.tokens[child]]), rel=1e-9)
            checked += 1
    assert checked >= 3
