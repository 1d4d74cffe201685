"""Number inputs the app checks itself (no streamlit here), so what a box shows is what a run uses.

A streamlit number box with min/max quietly keeps its previous value when the
user types one out of range (the box turns red, the script never sees the new
number). The app's boxes therefore carry no bounds: they pass any number on, and
`range_problem` refuses it with a message that names the allowed range. Lower
bounds come from the engine's `DecodeConfig`; upper bounds are the app's own
(the largest tree or text the explorer draws in reasonable time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tevcore.config import DecodeConfig


@dataclass(frozen=True)
class NumberRange:
    """Allowed values of one input: [low, high] (high None = no upper bound), integer or real."""

    low: float
    high: float | None
    integer: bool

    def text(self) -> str:
        def shown(v: float) -> str:
            return str(int(v)) if self.integer else f"{v:g}"

        return f"[{shown(self.low)}, ∞)" if self.high is None else f"[{shown(self.low)}, {shown(self.high)}]"


def decode_range(name: str, high: float | None = None) -> NumberRange:
    """The range of a DecodeConfig field: its lower bound from the engine, `high` from the page."""
    low = DecodeConfig.lowest(name)
    return NumberRange(low, high, integer=isinstance(low, int))


def range_problem(label: str, value, allowed: NumberRange) -> str | None:
    """None when `value` is allowed, else a one-line message naming the allowed range."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return f"{label} must be a number in {allowed.text()}, got {value!r}"
    if math.isnan(number) or math.isinf(number):
        return f"{label} must be a finite number in {allowed.text()}, got {value}"
    if allowed.integer and number != int(number):
        return f"{label} must be a whole number in {allowed.text()}, got {value:g}"
    if number < allowed.low or (allowed.high is not None and number > allowed.high):
        return f"{label} must lie in {allowed.text()}, got {value:g}"
    return None


def range_problems(checks: list[tuple[str, object, NumberRange]]) -> list[str]:
    """The one-line refusal of every (label, value, range) whose value is not allowed, in order."""
    return [problem for problem in (range_problem(label, value, allowed) for label, value, allowed in checks)
            if problem]
