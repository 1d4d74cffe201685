"""Widget values kept in a page's state object, so the page's widgets open where the participant left them.

Streamlit forgets a widget's value when a run of another page goes by (a page switch) and with the session (a
reload). A page keeps each value in its state object (`room_ui.page_state`): before drawing a widget it puts the
kept value back into session state when streamlit has forgotten it (`opened`), and after drawing it keeps the
widget's value (`kept`). A widget drawn this way is given no `value=`: its value lives in session state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st


@dataclass
class KeptWidgets:
    """The last value of each of a page's widgets, by widget key."""

    values: dict[str, Any] = field(default_factory=dict)

    def opened(self, key: str, default: Any, fit: Callable[[Any], Any] | None = None) -> str:
        """`key`, with its widget's value in session state: the one there, else the kept one, else `default`;
        `fit` makes it one the widget accepts now (a round index past the rounds there are, an option gone)."""
        ss = st.session_state
        value = ss[key] if key in ss else self.values.get(key, default)
        if fit is not None:
            value = fit(value)
        if key not in ss or ss[key] != value:
            ss[key] = value
        return key

    def kept(self, key: str, value: Any) -> Any:
        """Keep the widget's value (what it returned this run) and give it back."""
        self.values[key] = value
        return value


def within(low: float, high: float) -> Callable[[Any], Any]:
    """A fit for a number box: the value moved into [low, high]."""
    return lambda value: min(max(value, low), high)


def among(options: list) -> Callable[[Any], Any]:
    """A fit for a multiselect: the kept choices still offered."""
    return lambda values: [value for value in values if value in options]


def one_of(options: list) -> Callable[[Any], Any]:
    """A fit for a radio or a selectbox: the kept choice if still offered, else the first option."""
    return lambda value: value if value in options else options[0]
