"""Context lookup: n-gram matching, the mixture rows, per-session hit counts, exact decoding with it."""

from __future__ import annotations

import math

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.config import DecodeConfig
from tevcore.decoding.loop import generate, generate_ar
from tevcore.engine.draft_rows import DraftRows
from tevcore.proposers import GreedyRolloutProposer, NoDrafter, resolve_proposer
from tevcore.proposers.base import ProposerBase
from tevcore.proposers.lookup import ContextLookupProposer, lookup_continuation
from tevcore.decoding.trim import flat_costs


class UniformProposer(ProposerBase):
    """Inner proposer with flat rows, so any lift of a token comes from the lookup."""

    name, depth, hidden_layers, stand_in = "uniform", 3, (), True

    def __init__(self, vocab: int = 10) -> None:
        self.vocab = vocab

    def propose(self, session) -> torch.Tensor:
        return torch.full((self.depth, self.vocab), -math.log(self.vocab))


class FakeSession:
    def __init__(self, committed: list[int]) -> None:
        self.committed = committed


def test_the_latest_match_of_the_longest_suffix_wins():
    context = [1, 2, 3, 7, 9, 2, 3, 8, 5, 1, 2, 3]
    # suffix (1,2,3) first occurred at 0 and is followed by 7, 9; the shorter (2,3) is ignored
    assert lookup_continuation(context, 2) == [7, 9]
    # only the 2-gram (2,3) matches; its latest earlier occurrence is followed by 8
    assert lookup_continuation([2, 3, 8, 4, 2, 3, 6, 0, 2, 3], 3) == [6, 0, 2]


def test_no_match_or_too_short_context_gives_no_chain():
    assert lookup_continuation([1, 2, 3, 4], 3) == []
    assert lookup_continuation([5], 3) == []
    assert lookup_continuation([], 3) == []


def test_single_token_matches_only_when_allowed():
    context = [4, 6, 9, 4]
    assert lookup_continuation(context, 2) == []
    assert lookup_continuation(context, 2, min_ngram=1) == [6, 9]


def test_bad_ngram_range_is_refused():
    with pytest.raises(ValueError, match="min_ngram"):
        ContextLookupProposer(UniformProposer(), min_ngram=3, max_ngram=2)
    with pytest.raises(ValueError, match="min_ngram"):
        lookup_continuation([1, 2], 1, min_ngram=0)


def test_mixture_rows_stay_distributions_and_lift_the_chain():
    proposer = ContextLookupProposer(UniformProposer(), chain_depth=3)
    rows = proposer.propose(FakeSession([1, 2, 5, 6, 7, 1, 2])).shared
    assert torch.allclose(rows.exp().sum(-1), torch.ones(3), atol=1e-6)
    # no evidence yet: weight 1/2 on the chain 5, 6, 7 plus half the flat row
    for d, token in enumerate([5, 6, 7]):
        assert rows[d, token].exp().item() == pytest.approx(0.5 + 0.5 / 10)
        assert int(rows[d].argmax()) == token


def test_without_a_match_the_inner_rows_pass_through():
    inner = UniformProposer()
    rows = ContextLookupProposer(inner, chain_depth=3).propose(FakeSession([1, 2, 3]))
    assert torch.equal(rows.shared, inner.propose(None)) and not rows.after_first


def test_a_match_is_cheap_evidence_and_follows_the_growing_context():
    proposer = ContextLookupProposer(UniformProposer(), chain_depth=3)
    session = FakeSession([1, 2, 3])
    assert not proposer.has_cheap_evidence(session)
    session.committed += [4, 1, 2]  # "1 2" occurred before: a match
    assert proposer.has_cheap_evidence(session)
    assert proposer.propose(session).shared.argmax(-1).tolist() == [3, 4, 1]


def test_chains_run_deeper_than_the_inner_drafter_over_uniform_rows():
    proposer = ContextLookupProposer(UniformProposer(), chain_depth=5)
    assert proposer.depth == 5
    rows = proposer.propose(FakeSession([1, 2, 5, 6, 7, 8, 9, 1, 2])).shared
    assert rows.shape == (5, 10) and torch.allclose(rows.exp().sum(-1), torch.ones(5), atol=1e-6)
    assert rows.argmax(-1).tolist() == [5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="chain_depth"):
        ContextLookupProposer(UniformProposer(), chain_depth=0)


class BranchingUniformProposer(UniformProposer):
    """Flat rows, plus flat rows below depth-1 tokens 5 and 3 (as a drafter's second pass gives)."""

    def propose(self, session) -> DraftRows:
        flat = super().propose(session)
        return DraftRows(flat, {5: flat[1:].clone(), 3: flat[1:].clone()})


def test_the_chain_is_mixed_into_its_own_branch_only():
    proposer = ContextLookupProposer(BranchingUniformProposer(), chain_depth=4)
    rows = proposer.propose(FakeSession([1, 2, 5, 6, 7, 8, 1, 2]))  # chain 5, 6, 7, 8
    assert rows.shared.argmax(-1).tolist() == [5, 6, 7, 8]
    below = rows.after_first[5]
    assert below.shape == (3, 10) and below.argmax(-1).tolist() == [6, 7, 8]
    assert torch.allclose(below.exp().sum(-1), torch.ones(3), atol=1e-6)
    other = rows.after_first[3]  # a branch the chain does not take: flat, padded to the lookup's depth
    assert other.shape == (3, 10) and torch.allclose(other, torch.full((3, 10), -math.log(10)))


def test_hit_counts_follow_what_the_target_committed_per_session():
    proposer = ContextLookupProposer(UniformProposer(), chain_depth=3)
    session, other = FakeSession([1, 2, 5, 6, 7, 1, 2]), FakeSession([1, 2, 5, 6, 7, 1, 2])
    proposer.propose(session)  # chain 5, 6, 7 proposed at committed length 7
    session.committed += [5, 9]  # depth 1 hit, depth 2 missed, depth 3 never tried
    proposer.propose(session)
    assert proposer.hit_rates(session) == [pytest.approx(2 / 3), pytest.approx(1 / 3), pytest.approx(1 / 2)]
    proposer.propose(other)  # a second decode starts from the prior, untouched by the first
    assert proposer.hit_rates(other) == [0.5, 0.5, 0.5]


def test_a_round_scores_its_chain_once_when_the_inner_proposer_gives_no_tree():
    """The loop asks `propose_tree` first and, given None, `propose`: both learn, and a chain counts once."""
    proposer = ContextLookupProposer(UniformProposer(), chain_depth=3)
    session = FakeSession([1, 2, 5, 6, 7, 1, 2])
    assert proposer.propose_tree(session, parse_builder("best_first"), 4, 1.0, None) is None
    proposer.propose(session)
    session.committed += [5, 9]
    assert proposer.propose_tree(session, parse_builder("best_first"), 4, 1.0, None) is None
    proposer.propose(session)
    assert proposer.hit_rates(session) == [pytest.approx(2 / 3), pytest.approx(1 / 3), pytest.approx(1 / 2)]


def test_greedy_decoding_with_lookup_equals_autoregressive(tiny_target):
    proposer = ContextLookupProposer(GreedyRolloutProposer(depth=3))
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    for verifier in ("tev", "residual", "predraw"):
        config = DecodeConfig(max_new_tokens=24, temperature=0.0, budget=6, verifier=verifier, stop_tokens=())
        spec = generate(tiny_target, proposer, prompt, config)
        assert spec.tokens == generate_ar(tiny_target, prompt, config).tokens
    assert all(r.proposer.endswith("+ context lookup") for r in spec.rounds)


def test_proposer_specs(tiny_target):
    assert isinstance(resolve_proposer("rollout", tiny_target), GreedyRolloutProposer)
    wrapped = resolve_proposer("rollout+lookup", tiny_target)
    assert isinstance(wrapped, ContextLookupProposer) and wrapped.stand_in
    assert isinstance(resolve_proposer("default", tiny_target), ContextLookupProposer)
    bare = resolve_proposer("lookup", tiny_target)
    assert isinstance(bare, ContextLookupProposer) and isinstance(bare.inner, NoDrafter) and not bare.stand_in


def test_lookup_without_a_drafter_decodes_exactly_and_only_drafts_on_a_match(tiny_target):
    proposer = resolve_proposer("lookup", tiny_target)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    config = DecodeConfig(max_new_tokens=24, temperature=0.0, budget=6, stop_tokens=(), trim=1.5,
                          tree_costs=flat_costs(1.5, 6))
    spec = generate(tiny_target, proposer, prompt, config)
    assert spec.tokens == generate_ar(tiny_target, prompt, config).tokens
    context, drafted = list(prompt), 0
    for record in spec.rounds:  # flat rows alone forecast ~1: only a lookup match makes a tree
        if record.tree.size:
            drafted += 1
            assert lookup_continuation(context, 1)
        context += record.emitted_tokens
    assert drafted > 0
    with pytest.raises(ValueError, match="unknown proposer"):
        resolve_proposer("no-such-folder+lookup", tiny_target)
