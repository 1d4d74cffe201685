"""The drafter-kind registry: which kind a spec names, help texts made from it, and which kinds train."""

from __future__ import annotations

import pytest

from tevcore.cli import main
from tevcore.proposers import GreedyRolloutProposer, resolve_proposer
from tevcore.proposers.lookup import ContextLookupProposer
from tevcore.proposers.registry import KINDS, find_kind, kind_of, proposer_specs, ready_specs, trainer_for


@pytest.mark.parametrize("spec,kind,source", [
    ("rollout", "rollout", "rollout"), ("lookup", "lookup", "lookup"), ("drafter", "block-drafter", "drafter"),
    ("model:owner/name", "draft-lm", "owner/name"), ("dflash:owner/name", "dflash", "owner/name"),
    ("./runs/x/drafter", "block-drafter", "./runs/x/drafter"), ("/no/such/folder", "block-drafter", "/no/such/folder"),
])
def test_each_spec_is_claimed_by_its_kind(spec, kind, source):
    found, where = find_kind(spec)
    assert (found.name, where) == (kind, source)


def test_an_unknown_prefix_is_not_taken_for_a_folder():
    with pytest.raises(ValueError, match="unknown proposer 'dflsh:/x'"):
        find_kind("dflsh:/x")


def test_the_alias_and_the_lookup_suffix_wrap_any_kind(tiny_target):
    assert kind_of("default") is KINDS["block-drafter"] and kind_of("rollout+lookup") is KINDS["rollout"]
    wrapped = resolve_proposer("rollout+lookup", tiny_target)
    assert isinstance(wrapped, ContextLookupProposer) and isinstance(wrapped.inner, GreedyRolloutProposer)


def test_only_trainable_kinds_start_a_run():
    assert trainer_for(None)[0].name == "block-drafter" and trainer_for("dflash:x")[0].name == "dflash"
    with pytest.raises(ValueError, match="cannot be trained"):
        trainer_for("rollout")


def test_ready_specs_offer_every_kind_that_needs_no_folder():
    assert ready_specs()[0] == "default" and {"drafter", "lookup", "rollout"} <= set(ready_specs())


@pytest.mark.parametrize("command", ["round", "bench", "eval-drafter"])
def test_help_texts_name_every_kind(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for kind in KINDS.values():
        assert kind.spec in shown, (command, kind.spec)
    assert " ".join(proposer_specs().split()) in shown
