"""`rounds_at_context`: fresh sampled trees at one real context, each scored by the target, nothing committed."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.sampling import probs
from tevcore.engine.builder_specs import parse_builder
from tevcore.lab.ceilings import design_ceilings
from tevcore.lab.context_rounds import RescoredRounds, estimated_kept_bytes, rounds_at_context
from tevcore.lab.simulate import verify_rounds
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.proposers.draft_lm import load_draft_lm
from tevcore.target.loading import load_target
from tevcore.target.session import TargetSession
from tevcore.verify.registry import rules_for

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


@pytest.mark.parametrize("kind, builder", [("rollout", "sampled:2,2"), ("draft LM", "mixed:3,1")])
def test_rounds_that_let_their_rows_go_give_every_rule_the_same_verdicts_as_rounds_that_keep_them(pair, kind,
                                                                                                   builder):
    """The same seed, the same trees, the same results: the kept verdicts at the draw's seed, the rules run on
    trees scored again at another seed, the ceilings, the context's row and the fixed tree's 1 + C."""
    target, proposers = pair
    args = (target, proposers[kind], CONTEXT, parse_builder(builder), 6, 0.9, 30)
    full = rounds_at_context(*args, seed=7)
    lean = rounds_at_context(*args, seed=7, keep_rows=False)
    assert isinstance(lean.rounds, RescoredRounds) and len(lean.rounds) == len(full.rounds) == 30
    assert [t.tokens.tolist() for t in lean.trees] == [t.tokens.tolist() for t in full.trees]
    names = rules_for(full.builder)
    assert set(lean.verified) == set(names) and lean.verified_seed == 7
    for seed in (7, 8):  # 7: the verdicts made at the draw; 8: the rules run again on the rescored trees
        _same_results(lean.verify(names, seed), verify_rounds(names, full.rounds, 0.9, seed))
    assert lean.design_ceilings() == design_ceilings(full)
    assert torch.equal(lean.context_probs, full.context_probs)
    assert lean.best_first_length == full.best_first_length and lean.size_note() == full.size_note()
    assert lean.at_hand(0) and not lean.at_hand(5)  # the first round's rows are held from the draw
    assert torch.equal(lean.rounds[0][1], full.rounds[0][1])
    tree, logits = lean.rounds[5]  # one round read again: bit for bit the rows it was drawn with
    assert tree is lean.trees[5] and torch.equal(logits, full.rounds[5][1])
    assert lean.at_hand(5) and not lean.at_hand(0)  # the last round read is the one held
    rows = sum(logits.nbytes for _, logits in full.rounds)
    assert full.kept_bytes() - lean.kept_bytes() > 0.8 * rows  # what is let go: the trees' rows (a draft LM's own
    # proposal rows, one per drawing node, stay: its rrs residuals read them)


def _same_results(found, expected) -> None:
    assert list(found) == list(expected)
    for name, result in found.items():
        other = expected[name]
        assert torch.equal(result.emitted, other.emitted) and torch.equal(result.first_tokens, other.first_tokens)
        assert torch.equal(result.expected_lengths, other.expected_lengths)
        assert (result.law_variances is None) == (other.law_variances is None)


def test_a_round_scored_again_with_other_rows_than_it_was_drawn_with_is_refused(pair):
    target, proposers = pair
    lean = rounds_at_context(target, proposers["rollout"], CONTEXT, parse_builder("sampled:2,2"), 6, 1.0, 4, seed=1,
                             keep_rows=False)
    prints = list(lean.rounds.fingerprints)
    prints[2] = bytes(16)
    tampered = RescoredRounds(lean.trees, prints, lean.rounds._rescore)
    assert torch.equal(tampered[1][1], lean.rounds[1][1])
    with pytest.raises(ValueError, match=r"^round 2's tree scored again gave other target rows .*draw the trees "
                                         r"again$"):
        tampered[2]
    with pytest.raises(ValueError, match="round 2's tree"):
        verify_rounds(["tev"], tampered, 1.0, 8)


class Gone(Exception):
    pass


def test_rules_run_again_on_rescored_trees_stop_between_trees_once_the_page_is_gone(pair):
    target, proposers = pair
    lean = rounds_at_context(target, proposers["rollout"], CONTEXT, parse_builder("sampled:2,2"), 6, 1.0, 6, seed=1,
                             keep_rows=False)
    asked = []

    def still_here() -> None:
        asked.append(1)
        if len(asked) > 3:
            raise Gone

    assert lean.verify(["tev"], 1, between=still_here)  # the draw's seed: the kept verdicts, no tree scored again
    assert not asked
    with pytest.raises(Gone):
        lean.verify(["tev"], 2, between=still_here)
    assert len(asked) == 4  # asked before each of the first three trees and the fourth: stopped there


@pytest.mark.parametrize("kind, keep_rows", [("rollout", False), ("rollout", True), ("draft LM", True)])
def test_the_estimate_made_before_the_draw_bounds_the_bytes_the_rounds_keep(pair, kind, keep_rows):
    """Per-depth proposal rows are kept once for all rounds; a draft LM's rows (one per drawing node) are counted
    by the draw as it goes (`kept`), not by the estimate, unless every tree keeps its rows anyway."""
    target, proposers = pair
    proposer = proposers[kind]
    told = []
    drawn = rounds_at_context(target, proposer, CONTEXT, parse_builder("sampled:3,2,1"), 8, 1.0, 25, seed=2,
                              keep_rows=keep_rows, kept=told.append)
    vocab = target.vocab_size
    rows = 25 * 9 * vocab * 4 if keep_rows else 0
    estimate = estimated_kept_bytes(25, 8, vocab, proposer.depth, keep_rows, rules=len(rules_for(drawn.builder)))
    if kind == "draft LM":
        estimate += sum(t.draws.rows.nbytes for t in drawn.trees)  # its own rows per tree, which the draw counts
    assert rows < drawn.kept_bytes() <= estimate
    assert len(told) == 25 and told == sorted(told) and told[-1] <= drawn.kept_bytes()
    if kind == "rollout":
        # one copy of the per-depth rows for each number of depths that drew (the budget cuts the last one's draws)
        assert len({t.draws.rows.data_ptr() for t in drawn.trees}) == len({t.draws.rows.shape for t in drawn.trees})
