"""A drafter for the explorer: the one asked for, or the stand-in with a note that says why it drafts instead."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tevcore.studio.models import drafter_choices, drafter_with_fallback, model_spec_key


def _loader(broken: set[str], stand_in: set[str] = frozenset()):
    def load(spec: str):
        if spec in broken:
            raise FileNotFoundError(f"no drafter at {spec}")
        return SimpleNamespace(name=spec, stand_in=spec in stand_in or spec == "rollout")
    return load


def test_the_drafter_asked_for_drafts_and_a_missing_one_gives_way_to_the_stand_in_with_a_note():
    assert drafter_with_fallback("default", _loader(set())) == (_loader(set())("default"), None)
    proposer, note = drafter_with_fallback("runs/gone/checkpoint-5", _loader({"runs/gone/checkpoint-5"}))
    assert proposer.name == "rollout" and "'runs/gone/checkpoint-5' is not available (no drafter at" in note
    proposer, note = drafter_with_fallback("default", _loader(set(), stand_in={"default"}))
    assert proposer.name == "default" and "no committed drafter for this target" in note
    with pytest.raises(FileNotFoundError):  # the stand-in itself failing is not hidden behind another
        drafter_with_fallback("rollout", _loader({"rollout"}))


def test_a_chosen_drafter_is_offered_first_alone_and_with_the_lookup(tmp_path):
    plain = drafter_choices()
    assert "rollout" in plain
    chosen = drafter_choices("runs/r/checkpoint-50")
    assert chosen[:2] == ["runs/r/checkpoint-50", "runs/r/checkpoint-50+lookup"] and chosen[2:] == plain
    (tmp_path / "m").mkdir()
    assert model_spec_key(str(tmp_path / "m") + "/") == str(tmp_path / "m") and model_spec_key("default") == "default"
