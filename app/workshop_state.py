"""The exit-law workshop's state, typed, in one object per participant (`room_ui.page_state(WorkshopSession)`): its
widgets' values, each preset's edited table, and what the studio computed for the table on screen (the tree's
laws, the verifiers' walks, the coupling's laws and rounds, the mixed node's two orders), each with the settings it
was made with, so a page switch or a reload finds the edits and recomputes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from comparison_state import Made
from kept_widgets import KeptWidgets


@dataclass
class WorkshopSession:
    """Everything the workshop shows, kept for the participant across page switches and reloads."""

    widgets: KeptWidgets = field(default_factory=KeptWidgets)
    edits: dict[str, pd.DataFrame] = field(default_factory=dict)  # each preset's last edited table
    bases: dict[str, pd.DataFrame] = field(default_factory=dict)  # the table each preset's editor opened with
    resets: dict[str, int] = field(default_factory=dict)  # how often each preset was reset (a fresh editor each)
    shown: str | None = None  # the preset on screen
    lesson: Made | None = None  # the tree's flow and bonus laws (TreeLesson), by table
    walks: Made | None = None  # the two verifiers' walks (Walks), by table and seed
    coupling: Made | None = None  # the coupling's laws (Coupling), by table
    orders: Made | None = None  # the mixed node's two orders (TwoOrders), by table and seed
    rates: Made | None = None  # the coupling's empirical rates over rounds, by table, rounds and seed


def table_key(table: pd.DataFrame) -> str:
    """The edited table as text: the key of what was computed from it."""
    return table.to_json(orient="split", date_format="iso")
