"""The workshop's per-node flow bars."""

from __future__ import annotations

from collections.abc import Sequence

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
