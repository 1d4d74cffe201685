"""Room attack: the heaviest click a participant can make keeps less than the room's memory budget, and a request
past the budget is refused in one line naming it, before any work (or, for a drafter whose proposal rows grow
with the tree, as soon as the draw passes it).

The heaviest click is "sampled trees at an explorer round's context" at the room's caps (200 trees of 64 nodes):
each tree's target rows over the full vocabulary used to stay in the session (about 2.5 GB with the embedded
target); the rounds now keep the trees, their verdicts and fingerprints, and the estimate the service checks
first is held against the bytes really kept.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tevcore.engine.builder_specs import parse_builder
from tevcore.lab.context_rounds import estimated_kept_bytes
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.proposers.draft_lm import load_draft_lm
from tevcore.room.limits import ROOM, CapExceeded
from tevcore.room.queue import ComputeQueue
from tevcore.studio import comparison
from tevcore.studio.turns import Seat
from tevcore.target.loading import load_target
from tevcore.verify.registry import rules_for

pytestmark = pytest.mark.usefixtures("one_thread_module")

CONTEXT = [5, 9, 13, 21, 8, 40, 3]
HEAVIEST = "sampled:4,4,4"  # 1 + 4 + 16 + 64 nodes, cut to the budget cap: every tree as large as the room allows


def _seat(limits=ROOM) -> Seat:
    return Seat(limits, ComputeQueue(1), "participant",
                on_wait=lambda place: pytest.fail("a request refused on its size stood in line"))


@pytest.fixture(scope="module")
def tiny(tiny_model_folder):
    folder = str(tiny_model_folder("llama", seed=3))
    target = load_target(folder, device="cpu")
    return target, GreedyRolloutProposer(depth=3), load_draft_lm(folder, target, depth=3)


def test_the_heaviest_click_of_the_room_keeps_what_its_estimate_says_and_less_than_the_budget(tiny):
    target, rollout, _ = tiny
    builder = parse_builder(HEAVIEST, ROOM.sampled_budget)
    drawn = comparison.context_rounds(Seat(ROOM, ComputeQueue(1), "p"), target, rollout, CONTEXT, builder,
                                      ROOM.sampled_budget, 1.0, ROOM.sampled_rounds, 0)
    assert len(drawn.rounds) == ROOM.sampled_rounds and drawn.sizes()[2] == ROOM.sampled_budget
    estimate = estimated_kept_bytes(ROOM.sampled_rounds, ROOM.sampled_budget, target.vocab_size, rollout.depth,
                                    keep_rows=False, rules=len(rules_for(builder)))
    assert drawn.kept_bytes() <= estimate <= ROOM.session_bytes
    drawn.rounds[7]  # a page reads one round: its rows are scored again and held until another is read
    assert drawn.kept_bytes() <= estimate


def test_at_the_embedded_targets_size_the_rooms_heaviest_click_fits_the_budget_and_its_rows_would_not():
    vocab, depth = 49152, 6  # SmolLM2-135M's vocabulary; the committed block drafter's depth
    builder = parse_builder(HEAVIEST, ROOM.sampled_budget)
    lean = estimated_kept_bytes(ROOM.sampled_rounds, ROOM.sampled_budget, vocab, depth, keep_rows=False,
                                rules=len(rules_for(builder)))
    rows = estimated_kept_bytes(ROOM.sampled_rounds, ROOM.sampled_budget, vocab, depth, keep_rows=True)
    assert lean <= ROOM.session_bytes < rows
    stand_in = SimpleNamespace(vocab_size=vocab)  # refused on its size before any model is touched
    with pytest.raises(CapExceeded, match=r"^200 trees of up to 64 nodes would keep about [\d.,]+ MB, over this "
                                          r"server's memory budget of 1\.0 MB per request \(session_bytes\)$"):
        comparison.context_rounds(_seat(ROOM.with_caps(session_bytes=1 << 20)), stand_in,
                                  SimpleNamespace(depth=depth), CONTEXT, builder, 64, 1.0, 200, 0)


def test_toy_rounds_past_the_budget_are_refused_before_the_draw():
    with pytest.raises(CapExceeded, match=r"^1000 toy trees of up to 64 nodes would keep about .*\(session_bytes\)$"):
        comparison.toy_rounds(_seat(ROOM.with_caps(session_bytes=1 << 20)), parse_builder(HEAVIEST, 64), 1000, 64,
                              1.0, 0)


def test_a_drafter_whose_rows_grow_with_the_tree_is_stopped_once_the_draw_passes_the_budget(tiny):
    """A draft LM keeps a proposal row per drawing node, which the estimate cannot know: the draw counts them."""
    target, _, draft_lm = tiny
    builder = parse_builder(HEAVIEST, 64)
    estimate = estimated_kept_bytes(200, 64, target.vocab_size, draft_lm.depth, keep_rows=False,
                                    rules=len(rules_for(builder)))
    trees = []
    limits = ROOM.with_caps(session_bytes=estimate + 1)
    with pytest.raises(CapExceeded, match=r"^200 trees of up to 64 nodes would keep about .*\(session_bytes\)$"):
        comparison.context_rounds(Seat(limits, ComputeQueue(1), "p"), target, draft_lm, CONTEXT, builder, 64, 1.0,
                                  200, 0, progress=lambda done, total: trees.append(done))
    assert 0 < len(trees) < 200  # stopped during the draw, not before it


def test_with_the_embedded_target_and_drafter_the_kept_bytes_stay_under_the_estimate(default_target,
                                                                                      default_proposer):
    """The real vocabulary and the committed drafter (with its context lookup), a few trees as large as the room
    allows: the bytes kept, summed over every tensor, stay under the service's estimate."""
    builder = parse_builder(HEAVIEST, ROOM.sampled_budget)
    context = list(range(300, 340))
    drawn = comparison.context_rounds(Seat(ROOM, ComputeQueue(1), "p"), default_target, default_proposer, context,
                                      builder, ROOM.sampled_budget, 1.0, 8, 0)
    estimate = estimated_kept_bytes(8, ROOM.sampled_budget, default_target.vocab_size, default_proposer.depth,
                                    keep_rows=False, rules=len(rules_for(builder)))
    drawn.rounds[3]
    rows = 8 * (ROOM.sampled_budget + 1) * default_target.vocab_size * 4
    assert drawn.kept_bytes() <= estimate < rows  # less than the trees' rows it used to keep
