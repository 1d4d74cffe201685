"""The workshop's figures: per-node flow bars, and the coupling preset's p, q and depth-1 acceptance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, category_axis, distinct


def flow_bars_figure(labels: Sequence[str], flow) -> go.Figure:
    """P, m and X of every node side by side (the workshop's live recomputation)."""
    labels = distinct(labels)
    fig = go.Figure()
    for name, values, colour in (("P(v)", flow.path_prob, "#3b82f6"), ("m(v)", flow.child_mass, "#a3a3a3"),
                                 ("X(v)", flow.exit_mass, EXIT_COLOUR)):
        fig.add_trace(go.Bar(x=list(labels), y=values.tolist(), name=name, marker_color=colour))
    fig.update_layout(barmode="group", title=f"flow per node (sum X = {float(flow.exit_mass.sum()):.4f})",
                      yaxis={"title": "probability", "range": [0, 1.05]}, height=320,
                      xaxis=category_axis(labels), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def coupling_figure(tokens: Sequence[str], p: Sequence[float], q: Sequence[float], guess: int) -> go.Figure:
    """p and q per token side by side, with their overlap min(p, q) (its sum is 1 - TV(p, q)); the fixed guess
    (the drafter's argmax) is named on the axis."""
    labels = distinct([f"{t} (fixed guess)" if i == guess else t for i, t in enumerate(tokens)])
    p, q = [float(v) for v in p], [float(v) for v in q]
    fig = go.Figure()
    for name, values, colour in (("p (target)", p, "#3b82f6"), ("q (drafter)", q, "#f59e0b"),
                                 ("min(p, q): the coupled mass", [min(a, b) for a, b in zip(p, q)], "#10b981")):
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=colour))
    fig.update_layout(barmode="group", title="the target's row p and the drafter's row q after the context",
                      yaxis={"title": "probability", "rangemode": "tozero"}, xaxis=category_axis(labels), height=340,
                      legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
                      margin={"l": 10, "r": 10, "t": 70, "b": 10})
    return fig


def acceptance_figure(laws: Mapping[str, float], rates: Mapping[str, tuple[float, float]] | None = None) -> go.Figure:
    """Depth-1 acceptance of each design: its law (bars) and, if drawn, its empirical rate (markers, 1.96 s.e.)."""
    names = distinct(list(laws))
    fig = go.Figure(go.Bar(x=names, y=[laws[n] for n in laws], name="law", marker_color="#94a3b8",
                           text=[f"{laws[n]:.3f}" for n in laws], textposition="outside"))
    if rates:
        shown = [n for n in laws if n in rates]
        fig.add_trace(go.Scatter(x=shown, y=[rates[n][0] for n in shown], mode="markers", name="empirical",
                                 error_y={"type": "data", "array": [1.96 * rates[n][1] for n in shown]},
                                 marker={"color": EXIT_COLOUR, "size": 12, "symbol": "diamond"}))
    fig.update_layout(title="depth-1 acceptance: a fixed guess against a coupled draw",
                      yaxis={"title": "probability the node is accepted", "range": [0, 1.15]},
                      xaxis=category_axis(names), height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
