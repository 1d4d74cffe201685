"""The pre-draft skip gate: rounds with evidence always draft; no-evidence rounds that keep nothing stop drafting."""

from __future__ import annotations

import pytest

from tevcore.decoding.skip_gate import SkipGate
from tevcore.proposers.base import ProposerBase


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


def test_evidence_is_the_proposers_own_call_with_a_no_op_default():
    class Plain(ProposerBase):
        pass

    class Knows(ProposerBase):
        def has_cheap_evidence(self, session):
            return session == "match"

    assert not Plain().has_cheap_evidence("match") and Plain().observe_round("match", None) is None
    assert Knows().has_cheap_evidence("match") and not Knows().has_cheap_evidence("other")
