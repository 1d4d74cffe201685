"""Widget values kept in a page's state object, so the page's widgets open where the participant left them.

Streamlit forgets a widget's value when a run of another page goes by (a page switch), when a run of its own page
does not draw it (a page that stops early), and with the session (a reload). A page keeps each value in its state
object (`room_ui.page_state`): it draws each widget with the kept value as the widget's own starting value (`args`,
`choice`), so the browser's copy of the widget starts from it too, and keeps what the widget returns (`kept`).
Session state is never written for a widget: a value put there by the script is not always the one the browser
sends back on the next click.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any



@dataclass
class KeptWidgets:
    """The last value of each of a page's widgets, by widget key."""

    values: dict[str, Any] = field(default_factory=dict)

    def args(self, key: str, default: Any, fit: Callable[[Any], Any] | None = None,
             param: str = "value") -> dict[str, Any]:
        """The widget's key and its starting value (the kept one, else `default`) as the keyword `param` (a
        multiselect's is `default`); `fit` makes the value one the widget accepts now (a round index past the rounds
        there are, an option gone)."""
        value = self.values.get(key, default)
        return {"key": key, param: fit(value) if fit is not None else value}

    def choice(self, key: str, options: list, default: Any = None) -> dict[str, Any]:
        """A radio's or selectbox's key and starting index: the kept option if still offered, else `default`, else
        the first."""
        value = self.values.get(key, default)
        value = value if value in options else default if default in options else options[0]
        return {"key": key, "index": options.index(value)}

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
