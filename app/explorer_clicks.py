"""What a click on the explorer's tree figure selected (no streamlit here): a node, or the parent of a folded fan.

A plotly selection reaches the page as the chart's state, its points carrying
the figure's customdata: a node id, or `FOLD_PREFIX` and the parent id on a
"+N more" node.
"""

from __future__ import annotations

from collections.abc import Mapping

from figures.folding import FOLD_PREFIX


def _clicked_data(chart_state) -> list:
    """The customdata of every point a click on the tree figure selected."""
    try:
        points = list(chart_state["selection"]["points"]) if chart_state else []
    except (KeyError, TypeError):
        return []
    out = []
    for point in points:
        data = point.get("customdata") if isinstance(point, Mapping) else None
        if isinstance(data, (list, tuple)):
            data = data[0] if data else None
        if data is not None and not isinstance(data, bool):
            out.append(data)
    return out


def clicked_node(chart_state) -> int | None:
    """The node id a click on the tree figure selected (its customdata), or None."""
    for data in _clicked_data(chart_state):
        try:
            return int(data)
        except (TypeError, ValueError):
            continue
    return None


def clicked_fold(chart_state) -> int | None:
    """The parent whose folded fan ("+N more") a click selected, or None."""
    for data in _clicked_data(chart_state):
        if isinstance(data, str) and data.startswith(FOLD_PREFIX):
            try:
                return int(data[len(FOLD_PREFIX):])
            except ValueError:
                continue
    return None


def clicked(chart_state) -> tuple[int | None, int | None]:
    """(node, fold) of one chart state: what a click chose and which fan it opened."""
    return clicked_node(chart_state), clicked_fold(chart_state)
