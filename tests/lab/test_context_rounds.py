"""`rounds_at_context`: fresh sampled trees at one real context, each scored by the target, nothing committed."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.sampling import probs
from tevcore.engine.builder_specs import parse_builder
from tevcore.lab.context_rounds import rounds_at_context
from tevcore.lab.simulate import verify_rounds
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.proposers.draft_lm import load_draft_lm
from tevcore.target.loading import load_target
from tevcore.target.session import TargetSession

pytestmark = pytest.mark.usefixtures("one_thread_module")

CONTEXT = [5, 9, 13, 21, 8, 40, 3]


@pytest.fixture(scope="module")
def pair(tiny_model_folder):
    """A tiny target and two proposers: per-depth rows (the stand-in rollout) and a draft LM (path-conditioned)."""
    folder = str(tiny_model_folder("llama", seed=3))
    target = load_target(folder, device="cpu")
    return target, {"rollout": GreedyRolloutProposer(depth=3), "draft LM": load_draft_lm(folder, target, depth=3)}


def _scored_alone(target, tree) -> torch.Tensor:
    session = TargetSession(target)
    session.prefill(CONTEXT, reserve=tree.max_depth + 1)
    return session.score_tree(tree).logits


@pytest.mark.parametrize("kind", ["rollout", "draft LM"])
def test_every_round_draws_a_fresh_tree_after_the_same_context_and_is_scored_by_the_target(pair, kind):
    target, proposers = pair
    drawn = rounds_at_context(target, proposers[kind], CONTEXT, parse_builder("sampled:2,2"), 6, 1.0, 12, seed=4)
    assert drawn.builder.name == "sampled:2,2" and len(drawn.rounds) == 12
    shapes = set()
    for tree, logits in drawn.rounds:
        assert tree.sampled and tree.draws.mode == "iid" and 1 < tree.size <= 6
        assert int(tree.tokens[0]) == CONTEXT[-1]
        assert logits.shape == (tree.num_nodes, target.model.config.vocab_size)
        assert torch.allclose(logits[0], drawn.rounds[0][1][0], atol=1e-5)  # nothing was committed between rounds
        shapes.add(tuple(tree.tokens.tolist()))
    assert len(shapes) > 1, "every round drew the same tree"
    for tree, logits in drawn.rounds[:2]:  # the rows are the target's after the context, as a lone session gives
        assert torch.allclose(logits, _scored_alone(target, tree), atol=1e-4)
    fixed, fixed_logits = drawn.best_first
    assert not fixed.sampled and fixed.size == max(tree.size for tree, _ in drawn.rounds)  # the same size
    assert torch.allclose(fixed_logits, _scored_alone(target, fixed), atol=1e-4)
    assert torch.allclose(drawn.context_probs, probs(_scored_alone(target, fixed)[0].double(), 1.0), atol=1e-6)
    again = rounds_at_context(target, proposers[kind], CONTEXT, parse_builder("sampled:2,2"), 6, 1.0, 12, seed=4)
    assert [t.tokens.tolist() for t, _ in again.rounds] == [t.tokens.tolist() for t, _ in drawn.rounds]


@pytest.mark.parametrize("kind, builder", [("rollout", "sampled-wor:3,1"), ("draft LM", "mixed:3,1")])
def test_rrs_over_the_trees_drawn_at_one_context_emits_the_targets_row(pair, kind, builder):
    """Exact over the draw of the tree: rrs's first emitted token, one per fresh tree, is a sample of the target's
    row at the context (χ² with pooled small cells); so is TEV's, exact given each tree. The draft LM's mixed
    trees fix the top-1 of each node's own path-conditioned row."""
    target, proposers = pair
    drawn = rounds_at_context(target, proposers[kind], CONTEXT, parse_builder(builder), 5, 1.0, 300, seed=11)
    assert all(tree.draws.mixed == builder.startswith("mixed") for tree, _ in drawn.rounds)
    found = verify_rounds(["rrs", "tev"], drawn.rounds, 1.0, seed=12)
    for name in ("rrs", "tev"):
        assert found[name].first_token_pvalue(drawn.context_probs) > 1e-3, name


@pytest.mark.parametrize("builder, budget, rounds, message", [
    ("best_first", 6, 10, "builds fixed trees"),
    ("sampled:2,1,1,1", 6, 10, "needs 4 draft depths"),
    ("sampled:2", 6, 0, "rounds must be a positive integer"),
    ("sampled:0", 6, 10, "sampled:"),
])
def test_bad_settings_are_refused_in_one_line(pair, builder, budget, rounds, message):
    target, proposers = pair
    with pytest.raises(ValueError, match=message) as err:
        rounds_at_context(target, proposers["rollout"], CONTEXT, parse_builder(builder, budget), budget, 1.0, rounds,
                          seed=0)
    assert "\n" not in str(err.value)
