"""Traces of proposal-ratio rounds are checked against their draw record and their rule's registry entry.

Each case edits one written round of a real sampled rrs (or block) verdict the
way a hand or a broken tool could, and the checked reader must refuse it in
one line naming the file and the round; the untouched trace reads back whole.
"""

from __future__ import annotations

import json

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, StageTimings, write_trace
from tevcore.engine.sampling import make_generator
from tevcore.verify.trace_checks import read_trace
from tevcore.verify.verifiers import get_verifier

VOCAB = 12


def _sampled_record(builder: str = "sampled:3,2", verifier: str = "rrs", temperature: float = 0.8,
                    seed: int = 0) -> RoundRecord:
    generator = torch.Generator().manual_seed(seed)
    rows = torch.log_softmax(torch.randn(3, VOCAB, generator=generator), -1)
    tree = parse_builder(builder)(2, rows, 6, temperature, make_generator(seed))
    logits = 3 * torch.randn(tree.num_nodes, VOCAB, generator=generator)
    flow = target_flow(tree, logits, temperature, 3)
    verdict = get_verifier(verifier)(tree, logits, temperature, make_generator(seed))
    return RoundRecord(index=0, proposer="p", builder=builder, budget=6, temperature=temperature, context_length=5,
                       tree=tree, flow=flow, token_texts=[f"t{t}" for t in tree.tokens.tolist()],
                       missing_texts=[[f"m{t}" for t in row] for row in flow.missing_tokens.tolist()],
                       verifier=verifier, path=verdict.path, exit_node=verdict.exit_node,
                       bonus_token=verdict.bonus_token, bonus_text="b",
                       emitted_tokens=tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token],
                       emitted_text="x", timings=StageTimings(draft=0.1))


def _written(tmp_path, record: RoundRecord, edit=None):
    path = write_trace(tmp_path / "run.jsonl", [record], {})
    if edit is not None:
        header, line = path.read_text().splitlines()
        data = json.loads(line)
        edit(data)
        path.write_text(header + "\n" + json.dumps(data) + "\n")
    return path


@pytest.mark.parametrize("builder", ["sampled:3,2", "mixed:3,2", "mixed-wor:3,2"])
def test_an_untouched_sampled_or_mixed_trace_reads_back_whole(tmp_path, builder):
    """A mixed tree's fixed child (a point-mass draw whose q is the drafter's q of its token) passes the q checks."""
    record = _sampled_record(builder)
    read = read_trace(_written(tmp_path, record)).rounds[0]
    assert read.tree.traits == record.tree.traits and read.verifier == "rrs"
    assert torch.equal(read.tree.draws.q, record.tree.draws.q)
    assert torch.equal(read.tree.draws.fixed, record.tree.draws.fixed)
    assert read.tree.draws.mixed == builder.startswith("mixed")


@pytest.mark.parametrize("builder, temperature", [("policy@sharp0.01:3,2", 0.8), ("policy:3,2", 0.8),
                                                   ("policy:3,2", 0.0), ("mixed@qt0.7:3,2", 0.8)])
def test_a_policy_or_own_proposal_temperature_trace_reads_back_whole(tmp_path, builder, temperature):
    """A policy's sharp node keeps its top children all fixed, and at T = 0 it builds the best-first tree with
    every child fixed: both are its builder's shape, so its traces read back."""
    record = _sampled_record(builder, temperature=temperature)
    read = read_trace(_written(tmp_path, record)).rounds[0]
    assert torch.equal(read.tree.draws.fixed, record.tree.draws.fixed)
    assert read.builder == builder


def test_a_policy_round_at_t0_with_a_drawn_child_is_refused(tmp_path):
    record = _sampled_record("policy:3,2", temperature=0.0)
    with pytest.raises(ValueError, match="at T = 0 builds the best-first tree, every child fixed"):
        read_trace(_written(tmp_path, record, _fixed_flags(lambda i, parent, parents: i < len(parents) - 1)))


def _drop_draws(data):
    data["tree"]["draws"] = None


def _q_zero(data):
    data["tree"]["draws"]["q"][0] = 0.0


def _q_off_the_draft_logp(data):
    """Halve the q of the last child drawn from q (not a mixed tree's fixed child)."""
    draws = data["tree"]["draws"]
    drawn = [i for i, fixed in enumerate(draws.get("fixed") or [False] * len(draws["q"])) if not fixed]
    draws["q"][drawn[-1]] = draws["q"][drawn[-1]] / 2


def _fixed_q_off_the_draft_logp(data):
    draws = data["tree"]["draws"]
    draws["q"][0] = draws["q"][0] / 2


def _draw_on_another_node(data):
    draws = data["tree"]["draws"]
    draws["parents"][-1] = (draws["parents"][-1] + 1) % len(data["tree"]["tokens"])


@pytest.mark.parametrize("edit, message", [
    (_drop_draws, "builder .* draws its trees, but this round.s tree has no draw record"),
    (_q_zero, "has q = 0"),
    (_q_off_the_draft_logp, "the draws and the tree disagree"),
    (_draw_on_another_node, "not a child of the node it was drawn at"),
])
@pytest.mark.parametrize("builder", ["sampled:3,2", "mixed:3,2"])
def test_a_proposal_ratio_round_that_contradicts_its_draws_is_refused(tmp_path, edit, message, builder):
    path = _written(tmp_path, _sampled_record(builder), edit)
    with pytest.raises(ValueError, match=message) as raised:
        read_trace(path)
    assert str(raised.value).startswith(f"{path}, line 2 (round 0): ") and "\n" not in str(raised.value)


def test_a_block_round_needs_a_chain_drawn_once_per_node(tmp_path):
    record = _sampled_record("sampled:1,1,1", "block")
    read_trace(_written(tmp_path, record))  # the chain it verified

    def second_draw(data):  # the root drew its child twice: no longer a chain of single draws
        data["builder"] = "sampled:2,1,1"  # a builder whose shape allows it (sampled:1,1,1's is refused first)
        draws = data["tree"]["draws"]
        for key in ("parents", "children", "q"):
            draws[key].insert(1, draws[key][0])

    with pytest.raises(ValueError, match="block verifies a chain drawn one draw per node; this round's tree is not"):
        read_trace(_written(tmp_path, record, second_draw))


def test_a_bonus_the_rule_could_not_give_is_refused_but_blocks_residual_may_repeat_a_child(tmp_path):
    record = _sampled_record()

    def child_bonus(data):
        data["path"], data["exit_node"] = [0], 0
        data["bonus_token"] = data["tree"]["tokens"][1]

    with pytest.raises(ValueError, match="is a child of the exit node 0: rrs would have accepted it"):
        read_trace(_written(tmp_path, record, child_bonus))
    block = _sampled_record("sampled:1,1,1", "block")
    assert read_trace(_written(tmp_path, block, child_bonus)).rounds[0].bonus_token == int(block.tree.tokens[1])


def test_a_mixed_round_whose_fixed_child_contradicts_the_tree_or_comes_late_is_refused(tmp_path):
    record = _sampled_record("mixed:3,2")
    assert record.tree.draws.fixed[0]
    with pytest.raises(ValueError, match="the draws and the tree disagree"):
        read_trace(_written(tmp_path, record, _fixed_q_off_the_draft_logp))

    def fixed_last(data):  # the root's fixed flag moved onto its last draw
        root = [i for i, parent in enumerate(data["tree"]["draws"]["parents"]) if parent == 0]
        data["tree"]["draws"]["fixed"][root[0]], data["tree"]["draws"]["fixed"][root[-1]] = False, True

    with pytest.raises(ValueError, match="fixed children must come before its drawn ones"):
        read_trace(_written(tmp_path, record, fixed_last))


def test_a_block_round_on_a_mixed_chain_is_refused(tmp_path):
    """A mixed:1,1,1 chain holds only fixed children: it is no chain drawn from q, so block could not have run."""
    record = _sampled_record("mixed:1,1,1", "rrs")
    assert record.tree.draws.fixed.all()

    def as_block(data):
        data["verifier"] = "block"

    with pytest.raises(ValueError, match="block verifies a chain drawn one draw per node; this round's tree is not"):
        read_trace(_written(tmp_path, record, as_block))


# ---------------------------------------------------------------- issue 51: a round has its builder's shape

def _fixed_flags(value):
    def edit(data):
        draws = data["tree"]["draws"]
        if value is None:
            draws.pop("fixed")
        else:
            draws["fixed"] = [value(i, parent, draws["parents"]) for i, parent in enumerate(draws["parents"])]
    return edit


def _relabel(builder):
    def edit(data):
        data["builder"] = builder
    return edit


@pytest.mark.parametrize("edit, message", [
    (_fixed_flags(None), "builder mixed:3,2 fixes exactly one child per node, its first; node 0 has 0 fixed"),
    (_fixed_flags(lambda i, parent, parents: True), "fixes exactly one child per node, its first; node 0 has 3 fixed"),
    (_fixed_flags(lambda i, parent, parents: False), "fixes exactly one child per node, its first; node 0 has 0 fixed"),
    (_relabel("sampled:3,2"), "builder sampled:3,2 fixes no child, but node 0 has 1 fixed"),
    (_relabel("mixed-wor:3,2"), "builder mixed-wor:3,2 draws wor, but this round's draws are iid"),
    (_relabel("mixed:2,2"), "node 0 \\(depth 0\\) drew 3 children; builder mixed:2,2 draws at most 2 there"),
    (_relabel("mixed:3"), "builder mixed:3 draws at most 0 there"),
    (_relabel("best_first"), "builder best_first makes fixed trees, but this round's tree carries a draw record"),
])
def test_a_mixed_round_whose_draws_contradict_its_builder_is_refused(tmp_path, edit, message):
    """Each edit was read as a valid round before: the reader checked the draws against the tree, not against
    the shape the round's builder gives (one fixed child per node, first, in a mixed tree; none in a sampled)."""
    record = _sampled_record("mixed:3,2", seed=3)
    assert [int(n) for n in torch.bincount(record.tree.draws.parents)][:1] == [3]  # the root drew three
    with pytest.raises(ValueError, match=message) as raised:
        read_trace(_written(tmp_path, record, edit))
    assert "line 2 (round 0)" in str(raised.value) and "\n" not in str(raised.value)


def test_a_sampled_tev_round_without_its_draw_record_is_refused(tmp_path):
    tev = _sampled_record("sampled:3,2", verifier="tev")  # tev runs on any tree: only the builder tells
    with pytest.raises(ValueError, match="builder sampled:3,2 draws its trees, but this round's tree has no draw"):
        read_trace(_written(tmp_path, tev, _drop_draws))


def test_an_rrs_round_that_drafted_but_kept_no_draw_record_is_refused_as_the_app_refuses_its_trail(tmp_path):
    """The root alone with no draw record: the old reader took it (a root-only tree has every trait), while the
    app's trail refuses it ("has a fixed tree"). A round that drafted (budget > 0) under a sampled builder always
    records its draws, empty when none were made; a budget-0 round drafted nothing and reads as before."""
    from tevcore.engine.tree import DraftTree

    record = _sampled_record("sampled:3,2")
    root = DraftTree.root_only(int(record.tree.tokens[0]))

    def root_alone(budget):
        def edit(data):
            data["tree"] = root.to_dict()
            flow = target_flow(root, torch.randn(1, VOCAB), record.temperature, 3).to_dict()
            data["flow"], data["budget"] = flow, budget
            data["token_texts"], data["missing_texts"] = ["r"], [["m"] * 3]
            data["path"], data["exit_node"] = [0], 0
            data["emitted_tokens"] = [data["bonus_token"]]
        return edit

    with pytest.raises(ValueError, match="builder sampled:3,2 draws its trees, but this round's tree has no draw"):
        read_trace(_written(tmp_path, record, root_alone(6)))
    assert read_trace(_written(tmp_path, record, root_alone(0))).rounds[0].tree.size == 0
