"""Sampled builders: shape, budget, draw record, traces, and their one-line errors."""

import gzip
import json

import pytest
import torch

from tevcore.config import DecodeConfig
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.draft_rows import DraftRows
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, read_trace, write_trace
from tevcore.engine.sampling import make_generator, probs
from tevcore.engine.tree import DraftTree
from tevcore.verify.verifiers import check_pairing, get_verifier

ROOT, VOCAB = 7, 12


def rows(seed, depth=3, sharp=1.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.log_softmax(sharp * torch.randn(depth, VOCAB, generator=generator), -1)


@pytest.mark.parametrize("name", ["sampled:3,2,1", "sampled-wor:3,2,1", "sampled:1,1,1", "sampled-wor:4,1"])
@pytest.mark.parametrize("seed", range(6))
def test_shape_budget_and_draw_record(name, seed):
    logq, budget, temperature = rows(seed), 9, 0.8
    tree = parse_builder(name)(ROOT, logq, budget, temperature, make_generator(seed))
    widths = [int(w) for w in name.split(":")[1].split(",")]
    draws = tree.draws
    assert tree.sampled and tree.size <= budget and tree.max_depth <= len(widths)
    assert draws.mode == ("wor" if "wor" in name else "iid")
    counts = torch.bincount(draws.parents, minlength=tree.num_nodes).tolist()
    placed = 0
    for node in range(tree.num_nodes):  # breadth-first: a node draws K_d, or what the budget still has room for
        depth = int(tree.depths[node])
        if depth < len(widths) and counts[node]:
            assert counts[node] == min(widths[depth], budget - placed)
        placed += sum(1 for child in tree.children()[node])
        children, q = draws.at(node)
        assert sorted(set(children)) == tree.children()[node]  # equal draws share one node
        if children:
            expected = probs(logq[depth].double(), temperature)
            assert torch.allclose(draws.proposal(node), expected)
            assert q == pytest.approx([float(expected[int(tree.tokens[c])]) for c in children])
            assert tree.draft_logp[children].tolist() == pytest.approx(torch.tensor(q).log().tolist(), abs=1e-6)
    if draws.mode == "wor":
        assert len(set(draws.children.tolist())) == draws.children.numel()


def test_depth_one_rows_that_know_the_first_token_are_the_q():
    shared = rows(1)
    known = {3: rows(2, depth=2), 5: rows(3, depth=2)}
    draft = DraftRows(shared, known)
    tree = parse_builder("sampled:6,2")(ROOT, draft, None, 1.0, make_generator(4))
    for node in range(1, tree.num_nodes):
        if int(tree.depths[node]) == 1 and tree.children()[node]:
            first = int(tree.tokens[node])
            row = known[first][0] if first in known else shared[1]
            assert torch.allclose(tree.draws.proposal(node), probs(row.double(), 1.0))


def test_zero_temperature_draws_the_argmax_chain():
    logq = rows(5)
    tree = parse_builder("sampled:3,3,3")(ROOT, logq, 20, 0.0, make_generator(0))
    assert tree.tokens[1:].tolist() == logq.argmax(-1).tolist() and tree.parents.tolist() == [-1, 0, 1, 2]


def test_same_seed_same_tree():
    make = lambda: parse_builder("sampled:4,2")(ROOT, rows(2), 8, 1.0, make_generator(11)).to_dict()  # noqa: E731
    assert make() == make()


def _sampled_record(verifier="rrs", builder="sampled:3,2"):
    tree = parse_builder(builder)(ROOT, rows(3), 8, 1.0, make_generator(2))
    logits = torch.randn(tree.num_nodes, VOCAB, generator=torch.Generator().manual_seed(1))
    flow = target_flow(tree, logits, 1.0, missing_k=0)
    verdict = get_verifier(verifier)(tree, logits, 1.0, make_generator(3), flow=flow)
    emitted = tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token]
    return RoundRecord(index=0, proposer="test", builder=builder, budget=8, temperature=1.0, context_length=3,
                       tree=tree, flow=flow, token_texts=[], missing_texts=[], verifier=verifier,
                       path=verdict.path, exit_node=verdict.exit_node, bonus_token=verdict.bonus_token,
                       emitted_tokens=emitted)


def test_trace_keeps_the_draws(tmp_path):
    record = _sampled_record()
    record.token_texts = [str(t) for t in record.tree.tokens.tolist()]
    record.missing_texts = [[] for _ in range(record.tree.num_nodes)]
    path = write_trace(tmp_path / "s.jsonl", [record])
    back = read_trace(path).rounds[0].tree
    assert back.draws.to_dict() == record.tree.draws.to_dict() and back.draws.rows is None
    with pytest.raises(ValueError, match="proposal node 0 drew from is not kept"):
        back.draws.proposal(0)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["draws"].pop("q"), "draws have no 'q' field"),
    (lambda d: d["draws"]["q"].__setitem__(0, 1.5), r"drawn q must hold finite probabilities in \[0, 1\]"),
    (lambda d: d["draws"]["q"].__setitem__(0, -0.2), r"drawn q must hold finite probabilities in \[0, 1\]"),
    (lambda d: d["draws"]["children"].__setitem__(0, 99), "draws land on nodes outside the tree"),
    (lambda d: d["draws"].__setitem__("mode", "beam"), "draw mode must be one of iid, wor"),
])
def test_corrupt_draws_in_a_trace_are_one_line_errors(tmp_path, edit, message):
    record = _sampled_record()
    record.token_texts = [str(t) for t in record.tree.tokens.tolist()]
    record.missing_texts = [[] for _ in range(record.tree.num_nodes)]
    assert_edited_trace_is_refused(tmp_path / "s.jsonl.gz", record, edit, message)


def assert_edited_trace_is_refused(path, record, edit, message) -> None:
    """Write `record` as a trace, apply `edit` to its saved tree, and expect reading it back to fail in one line."""
    write_trace(path, [record])
    with gzip.open(path, "rt") as handle:
        header, line = handle.read().splitlines()
    data = json.loads(line)
    edit(data["tree"])
    with gzip.open(path, "wt") as handle:
        handle.write(header + "\n" + json.dumps(data) + "\n")
    with pytest.raises(ValueError, match=message) as err:
        read_trace(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("builder,message", [
    ("sampled:0", "draw counts .* must be positive integers"),
    ("sampled:x", "expected comma-separated draw counts .* like 'sampled:3,2,1'"),
    ("sampled-wor:2,-1", "draw counts .* must be positive integers"),
    ("sampled:", "expected comma-separated draw counts"),
])
def test_bad_builder_names(builder, message):
    with pytest.raises(ValueError, match=message):
        DecodeConfig(builder=builder)


def test_refused_pairings_name_the_builder():
    with pytest.raises(ValueError, match="builder 'best_first' are not drawn from the drafter's q.*use sampled:3,2,1"):
        DecodeConfig(builder="best_first", verifier="rrs")
    with pytest.raises(ValueError, match="builder 'sampled:2,1' are not a chain drawn one draw per node"):
        DecodeConfig(builder="sampled:2,1", verifier="block")
    for verifier in ("tev", "predraw", "residual", "greedy", "chain", "rrs", "naive_ratio"):
        check_pairing(verifier, parse_builder("sampled-wor:3,2"))  # every exact-given-tree rule runs on them too
    check_pairing("block", parse_builder("sampled-wor:1,1,1"))


def test_refused_at_verify_time_too():
    fixed = parse_builder("best_first")(ROOT, rows(1), 6)
    logits = torch.randn(fixed.num_nodes, VOCAB)
    with pytest.raises(ValueError, match="this round's tree is not drawn from the drafter's q"):
        get_verifier("rrs")(fixed, logits, 1.0, make_generator(0))
    bushy = parse_builder("sampled:4,2")(ROOT, rows(1, sharp=0.1), 8, 1.0, make_generator(0))
    with pytest.raises(ValueError, match="block verifies a chain drawn one draw per node; this round's tree is not"):
        get_verifier("block")(bushy, torch.randn(bushy.num_nodes, VOCAB), 1.0, make_generator(0))


def test_depth_list_longer_than_the_drafter():
    with pytest.raises(ValueError, match="4 draw depths but the drafter only gives 3 depths"):
        parse_builder("sampled:2,1,1,1")(ROOT, rows(1), 8, 1.0, make_generator(0))
    with pytest.raises(ValueError, match="needs 4 draft depths but the proposer gives 3"):
        parse_builder("sampled:2,1,1,1").check_depth(3)


def test_cut_tree_keeps_no_draws():
    tree = parse_builder("sampled:3,2")(ROOT, rows(2), 8, 1.0, make_generator(1))
    assert tree.first(tree.size) is tree and tree.first(2).draws is None
    assert isinstance(DraftTree.from_dict(tree.to_dict()).draws.q, torch.Tensor)
