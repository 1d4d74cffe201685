"""Verifier comparison figures: exit law, block lengths, bonus law, end-to-end results, latency."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, NAIVE_NAME


def _bar_colour(name: str, i: int) -> str:
    palette = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#e377c2")
    return EXIT_COLOUR if name == NAIVE_NAME else palette[i % len(palette)]


def exit_law_figure(node_labels: Sequence[str], law: Sequence[float], empirical: Mapping[str, Sequence[float]],
                    top: int = 25) -> go.Figure:
    """Empirical exit-node frequencies per verifier against the analytic exit law X (the top nodes)."""
    law = np.asarray(law, dtype=float)
    order = np.argsort(-law, kind="stable")[:top]
    xs = [node_labels[i] for i in order]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=law[order], name="exit law X(v)", marker_color="#d1d5db",
                         marker_line={"color": "#111827", "width": 1}))
    for i, (name, freq) in enumerate(empirical.items()):
        freq = np.asarray(freq, dtype=float)
        label = name + (" (NOT exact)" if name == NAIVE_NAME else "")
        fig.add_trace(go.Scatter(x=xs, y=freq[order], mode="markers", name=label,
                                 marker={"color": _bar_colour(name, i), "size": 9,
                                         "symbol": "x" if name == NAIVE_NAME else "circle"}))
    fig.update_layout(title=f"exit node: empirical vs analytic (top {len(order)} nodes by X)",
                      yaxis={"title": "probability"}, xaxis={"title": "exit node"}, height=360,
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def length_histogram_figure(length_freqs: Mapping[str, Sequence[float]], expected: float,
                            means: Mapping[str, float] | None = None) -> go.Figure:
    """Block-length distribution per verifier, with 1 + C as a vertical line."""
    fig = go.Figure()
    for i, (name, freq) in enumerate(length_freqs.items()):
        freq = np.asarray(freq, dtype=float)
        label = name + (" (NOT exact)" if name == NAIVE_NAME else "")
        if means and name in means:
            label += f", mean {means[name]:.3f}"
        fig.add_trace(go.Bar(x=np.arange(len(freq)), y=freq, name=label, marker_color=_bar_colour(name, i)))
    fig.add_vline(x=expected, line={"color": "black", "dash": "dash"},
                  annotation_text=f"1 + C = {expected:.3f}", annotation_position="top right")
    fig.update_layout(title="block length L = depth(exit) + 1", barmode="group", xaxis={"title": "L", "dtick": 1},
                      yaxis={"title": "frequency"}, height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def bonus_figure(token_labels: Sequence[str], law: Sequence[float], empirical: Mapping[str, Sequence[float]],
                 exit_label: str = "") -> go.Figure:
    """Bonus-token frequencies given one exit node against the masked, renormalised target row."""
    fig = go.Figure()
    fig.add_trace(go.Bar(x=list(token_labels), y=list(law), name="bonus law", marker_color="#d1d5db",
                         marker_line={"color": "#111827", "width": 1}))
    for i, (name, freq) in enumerate(empirical.items()):
        label = name + (" (NOT exact)" if name == NAIVE_NAME else "")
        fig.add_trace(go.Scatter(x=list(token_labels), y=list(freq), mode="markers", name=label,
                                 marker={"color": _bar_colour(name, i), "size": 9}))
    fig.update_layout(title=f"bonus token given exit at {exit_label}", yaxis={"title": "probability"},
                      height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def bench_figures(rows: pd.DataFrame) -> tuple[go.Figure, go.Figure]:
    """End-to-end results: speedup and mean block length per verifier (and trim, if several) across budgets."""
    labels = rows["verifier"].astype(str)
    if "trim" in rows and rows["trim"].dropna().nunique() > 1:
        labels = labels + " · trim " + rows["trim"].astype(str)
    figs = []
    for column, title in (("speedup", "speedup over autoregressive"), ("mean_block_length", "mean block length")):
        fig = go.Figure()
        if column in rows:
            for i, (name, part) in enumerate(rows.groupby(labels, sort=True)):
                part = part.sort_values("budget")
                fig.add_trace(go.Scatter(x=part["budget"], y=part[column], mode="lines+markers",
                                         name=str(name), line={"color": _bar_colour(str(name), i)}))
        fig.update_layout(title=title, xaxis={"title": "budget", "type": "log"}, yaxis={"title": column},
                          height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10})
        figs.append(fig)
    return figs[0], figs[1]


def latency_figure(seconds: Mapping[str, float]) -> go.Figure:
    """Mean decision latency per verifier (microseconds per decision)."""
    names = list(seconds)
    fig = go.Figure(go.Bar(x=names, y=[1e6 * seconds[n] for n in names],
                           marker_color=[_bar_colour(n, i) for i, n in enumerate(names)]))
    fig.update_layout(title="decision latency", yaxis={"title": "µs per decision"}, height=300,
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
