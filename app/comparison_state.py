"""The verifier comparison's state, typed, in one object per participant (`room_ui.page_state(ComparisonSession)`):
its widgets' values, the trace it opened, the trees it drew, the exit law of the tree on screen, its results and the
result files it read, each kept with the settings it was made with.

A page switch or a reload of the page finds it all again (nothing is recomputed); a result shown beside settings
that have changed since says which (`changes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kept_widgets import KeptWidgets


@dataclass(frozen=True)
class Made:
    """A result with the settings it was made with: the key that says whether it is current (every setting it
    depends on), the settings in words as the page names them, and the result itself."""

    key: tuple
    settings: dict[str, str]
    value: Any


def changes(made: Made, settings: dict[str, str]) -> list[str]:
    """How `made`'s settings differ from `settings` ('draws per verifier 100,000 (now 5,000)')."""
    return [f"{name} {was} (now {settings.get(name, '—')})" for name, was in made.settings.items()
            if settings.get(name) != was]


@dataclass
class ComparisonSession:
    """Everything the verifier comparison shows, kept for the participant across page switches and reloads."""

    widgets: KeptWidgets = field(default_factory=KeptWidgets)
    trace: Made | None = None  # key (file id,), value: the opened Trace
    toy_drawn: Made | None = None  # value: SampledRounds on the toy target
    live_drawn: Made | None = None  # value: (SampledRounds, token texts, where they were drawn)
    picked: Made | None = None  # value: (tree, rows) of the realised tree picked among the drawn rounds
    law: Made | None = None  # the exit law of the tree on screen at its temperature
    results: Made | None = None  # value: Shown (every verifier's draws on one tree)
    over: Made | None = None  # value: AcrossRounds (the rules over the drawn rounds)
    result_files: Made | None = None  # value: ResultFiles


@dataclass(frozen=True)
class Shown:
    """A comparison run with what its figures need of its tree: node labels, the token texts, and whether the tree
    was drawn from q (the rules that divide by q ran on it)."""

    comparison: Any  # tevcore.studio.comparison.VerifierComparison
    labels: list[str]
    texts: Any  # token id -> text (a list, or decoded on demand)
    drawn: bool
    standing: dict[str, str]  # each rule's standing in words, at the temperature it ran at
