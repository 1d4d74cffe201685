"""Where the tree loses the target's mass: an icicle whose widths are P(v) and whose gaps are X(v).

Each node is a box of width P(v); its children split that width by their edge
probability a (P(child) = P(v)·a(child)), so together they fill P(v)·m(v) and
the unfilled part under v is exactly its exit mass X(v) = P(v)(1 − m(v)). With
plotly's branchvalues="total" the values are the P(v) themselves; the flow is
read from the engine's `TargetFlow`, never recomputed here.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, PATH_COLOUR, node_name, number_text, short


def icicle_rows(tree, flow, token_texts: Sequence[str]) -> pd.DataFrame:
    """One row per node: id, parent id, label, value (= P, the box width), P, X, a, depth."""
    P = flow.path_prob.double().tolist()
    X = flow.exit_mass.double().tolist()
    a = flow.edge_prob.double().tolist()
    parents = tree.parents.tolist()
    values = list(P)
    # plotly drops a branch whose children sum past it: where m(v) = 1 up to rounding, widen v by that rounding
    child_sum = [0.0] * tree.num_nodes
    for v in range(tree.num_nodes - 1, 0, -1):  # children have larger indices than their parents
        values[v] = max(values[v], child_sum[v])
        child_sum[parents[v]] += values[v]
    values[0] = max(values[0], child_sum[0])
    rows = [{"id": str(v), "parent": "" if v == 0 else str(parents[v]),
             "label": "root" if v == 0 else short(token_texts[v] if v < len(token_texts) else "?", 12),
             "value": values[v], "P": P[v], "X": X[v], "a": a[v], "depth": int(tree.depths[v])}
            for v in range(tree.num_nodes)]
    return pd.DataFrame(rows)


def icicle_figure(tree, flow, token_texts: Sequence[str], *, path: Sequence[int] | None = None,
                  exit_node: int | None = None, title: str | None = None) -> go.Figure:
    """Icicle of the round: width = P(v), gap under v = X(v), colour = X(v); path and exit outlined."""
    rows = icicle_rows(tree, flow, token_texts)
    on_path = set(path or [])
    outline, width = [], []
    for v in range(tree.num_nodes):
        if v == exit_node:
            outline.append(EXIT_COLOUR)
            width.append(4)
        elif v in on_path:
            outline.append(PATH_COLOUR)
            width.append(3)
        else:
            outline.append("white")
            width.append(1)
    labels = [("★ " if v == exit_node else "") + label for v, label in enumerate(rows["label"])]
    hover = [f"<b>{html.escape(node_name(v, token_texts[v] if v < len(token_texts) else '?'))}</b> "
             f"(depth {d})<br>P = {number_text(p)} (width)   a = {number_text(a)}<br>X = {number_text(x)} "
             "(the gap below it)"
             for v, (p, a, x, d) in enumerate(zip(rows["P"], rows["a"], rows["X"], rows["depth"]))]
    fig = go.Figure(go.Icicle(
        # plain lists, not arrays: the page's figure JSON then carries the numbers as they are (readable, testable)
        ids=rows["id"].tolist(), parents=rows["parent"].tolist(), labels=labels, values=rows["value"].tolist(),
        branchvalues="total", customdata=rows[["P", "X"]].to_numpy().tolist(), hovertext=hover, hoverinfo="text",
        texttemplate="%{label}<br>P %{customdata[0]:.3f} · X %{customdata[1]:.3f}",
        marker={"colors": rows["X"].tolist(), "colorscale": "Reds", "cmin": 0.0,
                "cmax": float(max(rows["X"].max(), 1e-9)),
                "colorbar": {"title": {"text": "X(v)"}, "thickness": 12}, "line": {"color": outline, "width": width}},
        tiling={"orientation": "v"}, sort=False, name="icicle (width = P, gap = X)"))
    fig.update_layout(title=title, height=560, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig


def record_icicle_figure(record) -> go.Figure:
    """The icicle of one recorded round (accepted path outlined orange, exit node red with a star)."""
    return icicle_figure(record.tree, record.flow, record.token_texts, path=record.path, exit_node=record.exit_node,
                         title=f"round {record.index}: width = P(v), the empty part under a node = its exit mass "
                               f"X(v); colour = X(v)")
