"""Colours, token text, the category axis and the budget axis shared by the app's figures."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

PATH_COLOUR = "#ff7f0e"
EXIT_COLOUR = "#d62728"
BONUS_COLOUR = "#2ca02c"
X_RING_COLOUR = "rgba(214, 39, 40, 0.85)"
ROUND_COLOURS = ("#dbeafe", "#fde68a", "#dcfce7", "#fce7f3", "#e0e7ff", "#ffedd5", "#ccfbf1", "#f3e8ff")
NAIVE_NAME = "naive_ratio"
VISIBLE_SPACE = "␣"


def short(text: str, width: int = 10) -> str:
    """A token's text made visible: escapes shown, leading and trailing spaces as ␣, long tokens cut.

    A browser collapses edge spaces, so '7' and '7 ' would read alike on a chart; the ␣ keeps them apart.
    """
    if text is None:
        return "?"
    shown = repr(text)[1:-1]
    core = shown.strip(" ")
    if core:
        start = shown.index(core)
        shown = VISIBLE_SPACE * start + core + VISIBLE_SPACE * (len(shown) - start - len(core))
    else:
        shown = VISIBLE_SPACE * len(shown)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def distinct(labels: Sequence[str]) -> list[str]:
    """The labels with every repeat told apart (' (2)', ' (3)', ...): a category axis merges equal labels."""
    seen: dict[str, int] = {}
    out = []
    for label in map(str, labels):
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def category_axis(labels: Sequence[str], **extra) -> dict:
    """An axis that holds `labels` as categories, in this order.

    Without it plotly guesses the axis type from the labels after stripping quotes, '#', '$', '%' and spaces,
    so token labels such as "' #23" or "  #216" read as numbers and every other bar falls off the axis.
    """
    return {"type": "category", "categoryorder": "array", "categoryarray": list(labels), **extra}


def budget_axis(budgets, title: str = "budget (tree nodes)") -> dict:
    """A logarithmic budget axis with a tick at every measured budget and only there: plotly's own log ticks
    label the decades' minor steps (1, 2, ... 9, 10, 2 ...), which reads as budgets that were never run."""
    shown = sorted({int(b) for b in pd.to_numeric(pd.Series(list(budgets)), errors="coerce").dropna() if b > 0})
    return {"title": title, "type": "log", "tickvals": shown, "ticktext": [str(b) for b in shown]}


def top_shares(shares, top) -> list[float]:
    """The shares at indices `top`, then what the rest holds (never below 0): one bar chart's rows with '(rest)'."""
    picked = [float(shares[int(i)]) for i in top]
    return picked + [max(0.0, 1.0 - sum(picked))]


def number_text(value: float, digits: int = 4) -> str:
    """A probability, p-value or length as a person reads it: fixed digits, and scientific notation where fixed
    digits would show a tiny value as 0.0000 (a p-value that underflowed to 0 says it is below the smallest)."""
    value = float(value)
    if value == 0.0:
        return "0"
    if abs(value) < 10 ** -digits:
        return f"{value:.2e}"
    return f"{value:.{digits}f}"


def p_value_text(value: float) -> str:
    """A chi-square p-value: scientific notation when tiny, '< 1e-300' when it underflowed to 0."""
    return "< 1e-300" if float(value) == 0.0 else number_text(value)


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 round', '3 rounds' ('drew 1 time', 'drew 2 times'); `many` where the plural is not noun + 's'."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def node_name(node: int, text: str) -> str:
    """How a node is named: '7: ' your'', and the root as what it is, the context's last token (the previous
    round's bonus), not a draft token: "root (the context's last token ' the')"."""
    return f"root (the context's last token {text!r})" if node == 0 else f"{node}: {text!r}"
