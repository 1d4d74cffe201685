from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tevcore.studio.page_states import PageStates


@dataclass
class Form:
    steps: int = 100
    notes: list[str] = field(default_factory=list)


@dataclass
class Other:
    value: str = ""


def test_a_participant_finds_the_same_object_again_and_others_their_own():
    store = PageStates()
    mine = store.get("a", Form)
    mine.steps = 7
    assert store.get("a", Form) is mine and store.get("a", Form).steps == 7
    assert store.get("b", Form).steps == 100  # another participant's form is their own
    assert store.get("a", Other) is not mine  # one object per page type


def test_the_store_keeps_the_most_recent_participants_and_forgets_idle_ones():
    now = [0.0]
    store = PageStates(max_participants=2, idle_seconds=10, clock=lambda: now[0])
    store.get("a", Form).steps = 1
    store.get("b", Form).steps = 2
    store.get("a", Form)  # a is used again: b is now the oldest
    store.get("c", Form)
    assert len(store) == 2 and store.get("a", Form).steps == 1
    now[0] = 100.0
    assert store.get("a", Form).steps == 100  # idle past the time to live: a fresh form


def test_a_store_that_keeps_nobody_is_refused():
    with pytest.raises(ValueError, match="at least one participant"):
        PageStates(max_participants=0)
