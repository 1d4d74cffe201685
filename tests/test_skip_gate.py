"""The pre-draft skip gate: rounds with evidence always draft; no-evidence rounds that keep nothing stop drafting."""

from __future__ import annotations

import pytest

from tevcore.decoding.skip_gate import SkipGate, has_cheap_evidence


def test_a_disabled_gate_always_drafts():
    gate = SkipGate(enabled=False)
    for _ in range(20):
        assert gate.should_draft(False)
        gate.observe(False, False)


def test_failing_rounds_close_the_gate_until_a_recheck_and_a_pass_opens_it():
    gate = SkipGate(enabled=True, memory=3, recheck_every=4)
    for _ in range(3):  # learning: drafts while it has no evidence of failure
        assert gate.should_draft(False)
        gate.observe(False, False)
    assert [gate.should_draft(False) for _ in range(4)] == [False, False, False, True]
    gate.observe(False, True)  # the recheck kept part of its tree: draft again
    assert gate.should_draft(False)


def test_rounds_with_evidence_always_draft_and_do_not_teach_the_gate():
    gate = SkipGate(enabled=True, memory=2, recheck_every=100)
    for _ in range(2):
        gate.observe(False, False)
    assert not gate.should_draft(False)
    assert gate.should_draft(True)
    gate.observe(True, True)
    assert not gate.should_draft(False)


def test_bad_gate_settings_are_refused():
    with pytest.raises(ValueError):
        SkipGate(enabled=True, memory=0)


def test_evidence_comes_from_the_proposer_when_it_offers_any():
    class Plain:
        pass

    class Knows:
        def has_cheap_evidence(self, session):
            return session == "match"

    assert not has_cheap_evidence(Plain(), "match")
    assert has_cheap_evidence(Knows(), "match") and not has_cheap_evidence(Knows(), "other")
