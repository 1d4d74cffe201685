"""Colours and token text shared by the app's figures."""

from __future__ import annotations
PATH_COLOUR = "#ff7f0e"
EXIT_COLOUR = "#d62728"
BONUS_COLOUR = "#2ca02c"
X_RING_COLOUR = "rgba(214, 39, 40, 0.85)"
ROUND_COLOURS = ("#dbeafe", "#fde68a", "#dcfce7", "#fce7f3", "#e0e7ff", "#ffedd5", "#ccfbf1", "#f3e8ff")
NAIVE_NAME = "naive_ratio"


def short(text: str, width: int = 10) -> str:
    """A token's text made visible: whitespace shown, long tokens cut."""
    shown = repr(text)[1:-1] if text is not None else "?"
    return shown if len(shown) <= width else shown[: width - 1] + "…"
