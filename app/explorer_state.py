"""The explorer's view state, typed and keyed by round (no streamlit here).

A node id means something only inside its own round: node 30 of a 64-node
round does not exist in a 12-node one, and a widget whose labels depend on the
round reads an old label back as a plain string. So the chosen node is kept
per round as an int, and anything that is not a valid node of that round
falls back to the round's exit node.
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


def valid_node(value, num_nodes: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_nodes


def node_for_round(chosen: Mapping[int, int], round_index: int, num_nodes: int, default: int) -> int:
    """The node shown for a round: the one chosen there if it is a node of that round, else `default`."""
    value = chosen.get(round_index)
    return value if valid_node(value, num_nodes) else default
