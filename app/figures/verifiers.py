"""Verifier comparison figures: exit law, block lengths, bonus law, end-to-end results, latency.

Every chart that holds node or token labels on its x axis makes it a category axis (`category_axis`), and
draws the foil first, in open symbols, so its markers never hide an exact verifier's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, NAIVE_NAME, budget_axis, category_axis, distinct

EXIT_LAW_NAME = "exit law X(v)"
SYMBOLS = ("circle", "diamond", "square", "triangle-up", "star", "hexagon")


PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#e377c2")
KNOWN = ("tev", "predraw", "residual", "greedy", "chain")  # one colour and symbol each, the same on every chart


def _bar_colour(name: str, i: int) -> str:
    if name == NAIVE_NAME:
        return EXIT_COLOUR
    return PALETTE[(KNOWN.index(name) if name in KNOWN else i) % len(PALETTE)]


def _foil_last(names) -> list[str]:
    """The names with the foil first: it is drawn first, under the exact verifiers' markers."""
    names = list(names)
    return [n for n in names if n == NAIVE_NAME] + [n for n in names if n != NAIVE_NAME]


def _marker(name: str, i: int) -> dict:
    """The foil: a large open cross under the others; each exact verifier its own symbol, sizes shrinking."""
    if name == NAIVE_NAME:
        return {"color": EXIT_COLOUR, "size": 14, "symbol": "x-thin-open", "line": {"width": 2, "color": EXIT_COLOUR}}
    k = KNOWN.index(name) if name in KNOWN else i
    return {"color": _bar_colour(name, i), "size": max(6, 12 - i), "symbol": SYMBOLS[k % len(SYMBOLS)],
            "line": {"width": 1, "color": "white"}}


def _points(fig: go.Figure, xs: Sequence[str], empirical: Mapping[str, Sequence[float]], order=None) -> None:
    for i, name in enumerate(_foil_last(empirical)):
        values = np.asarray(empirical[name], dtype=float)
        label = name + (" (NOT exact)" if name == NAIVE_NAME else "")
        fig.add_trace(go.Scatter(x=list(xs), y=(values[order] if order is not None else values).tolist(),
                                 mode="markers", name=label, marker=_marker(name, i)))


def exit_law_figure(node_labels: Sequence[str], law: Sequence[float], empirical: Mapping[str, Sequence[float]],
                    top: int = 25, law_name: str = EXIT_LAW_NAME) -> go.Figure:
    """Empirical exit-node frequencies per verifier against the law they are tested on (the top nodes).

    `law_name` is the legend's name of that law: X(v) for the optimal rules, the chain's or greedy's own law.
    """
    law = np.asarray(law, dtype=float)
    order = np.argsort(-law, kind="stable")[:top]
    xs = distinct([node_labels[i] for i in order])
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=law[order].tolist(), name=law_name, marker_color="#d1d5db",
                         marker_line={"color": "#111827", "width": 1}))
    _points(fig, xs, empirical, order)
    fig.update_layout(title=f"exit node: empirical vs {law_name}" if len(law_name) <= 22 else
                      f"exit node: empirical vs {law_name.split(' (')[0]}",
                      yaxis={"title": "probability"}, xaxis=category_axis(xs, title=f"exit node (top {len(order)})"),
                      height=400, legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
                      margin={"l": 10, "r": 10, "t": 90, "b": 10})
    return fig


def length_histogram_figure(length_freqs: Mapping[str, Sequence[float]], expected: float,
                            means: Mapping[str, float] | None = None,
                            groups: Mapping[str, str] | None = None) -> go.Figure:
    """Block-length distribution per verifier (below) and each verifier's mean against 1 + C (above).

    The mean L of every verifier is a point on the top strip, on the same L axis as the histogram, and 1 + C is
    a line there at its value: the bars of L = 2 are as wide as the group, so a line drawn through them would
    seem to sit at 2. `groups` names each verifier's standing for this target (for example 'exact, optimal' or
    'exact only for T = 0'); the legend groups them under those titles, so a rule that is not exact here never
    sits among the optimal ones.
    """
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.35, 0.65], vertical_spacing=0.05)
    groups = groups or {}
    names = _foil_last(length_freqs)
    for i, name in enumerate(names):
        freq = np.asarray(length_freqs[name], dtype=float)
        label = name + (" (NOT exact)" if name == NAIVE_NAME else "")
        group = groups.get(name, "")
        fig.add_trace(go.Bar(x=np.arange(len(freq)).tolist(), y=freq.tolist(), name=label,
                             marker_color=_bar_colour(name, i), legendgroup=group, legendgrouptitle_text=group or None,
                             marker_pattern_shape="x" if name == NAIVE_NAME else ""), row=2, col=1)
        if means and name in means:
            fig.add_trace(go.Scatter(x=[means[name]], y=[label], mode="markers", showlegend=False, legendgroup=group,
                                     name=f"{label}: mean L", marker=_marker(name, i),
                                     hovertemplate=f"{label}: mean L = {means[name]:.4f}<extra></extra>"), row=1, col=1)
    fig.add_vline(x=expected, line={"color": "black", "dash": "dash", "width": 2}, row=1, col=1,
                  exclude_empty_subplots=False,
                  annotation_text=f"1 + C = {expected:.3f} (optimal exact)", annotation_position="top right")
    top = max((len(f) for f in length_freqs.values()), default=2)
    fig.update_xaxes(range=[0.5, top - 0.5], dtick=1)
    fig.update_xaxes(title_text="L (tokens per round)", row=2, col=1)
    fig.update_yaxes(title_text="frequency", row=2, col=1)
    fig.update_yaxes(title_text="mean L", type="category", categoryorder="array",
                     categoryarray=[n + (" (NOT exact)" if n == NAIVE_NAME else "") for n in names], row=1, col=1)
    fig.update_layout(title="block length L = depth(exit) + 1: each verifier's mean against 1 + C, and the "
                            "distribution", barmode="group", height=540, legend={"groupclick": "toggleitem"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return fig


def bonus_figure(token_labels: Sequence[str], law: Sequence[float], empirical: Mapping[str, Sequence[float]],
                 exit_label: str = "", law_name: str = "bonus law") -> go.Figure:
    """Bonus-token frequencies given one exit node against the masked, renormalised target row."""
    xs = distinct(token_labels)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[float(p) for p in law], name=law_name, marker_color="#d1d5db",
                         marker_line={"color": "#111827", "width": 1}))
    _points(fig, xs, empirical)
    fig.update_layout(title=f"bonus token given exit at {exit_label}", yaxis={"title": "probability"},
                      xaxis=category_axis(xs), height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")


def bench_series(rows: pd.DataFrame) -> pd.Series:
    """The series each benchmark row belongs to: one per (builder, verifier), and per trim where several are shown.

    Rows of different builders are different designs: joined into one line per verifier they zig-zag."""
    labels = rows["verifier"].astype(str)
    if "builder" in rows:
        labels = rows["builder"].fillna("builder not recorded").astype(str) + " + " + labels
    if "trim" in rows and rows["trim"].dropna().nunique() > 1:
        labels = labels + " · trim " + rows["trim"].astype(str)
    return labels


def bench_figures(rows: pd.DataFrame) -> tuple[go.Figure, go.Figure]:
    """End-to-end results: speedup and E[L] (mean tokens emitted per round) per (builder, verifier) (and trim, if
    several) across budgets, each series its own colour, named in the legend.

    The budget axis is logarithmic with a tick at every measured budget (and only there).
    """
    labels = bench_series(rows)
    xaxis = budget_axis(rows["budget"])
    names = sorted(labels.unique().tolist())
    figs = []
    for column, title, unit in (("speedup", "speedup over autoregressive", "× autoregressive"),
                                ("mean_emitted", "E[L]: mean tokens emitted per round", "tokens per round")):
        fig = go.Figure()
        if column in rows:
            for name, part in rows.groupby(labels, sort=True):
                part = part[pd.to_numeric(part["budget"], errors="coerce") > 0].sort_values("budget")
                colour = SERIES_COLOURS[names.index(name) % len(SERIES_COLOURS)]
                fig.add_trace(go.Scatter(x=part["budget"].tolist(), y=part[column].tolist(), mode="lines+markers",
                                         name=str(name), line={"color": colour}, marker={"color": colour}))
        fig.update_layout(title=title, xaxis=xaxis, yaxis={"title": unit, "tickformat": ".2f", "rangemode": "tozero"},
                          height=360, showlegend=True, legend={"title": {"text": "builder + verifier"}},
                          margin={"l": 10, "r": 10, "t": 40, "b": 10})
        figs.append(fig)
    return figs[0], figs[1]


def latency_figure(seconds: Mapping[str, float]) -> go.Figure:
    """Mean decision latency per verifier (microseconds per decision)."""
    names = list(seconds)
    fig = go.Figure(go.Bar(x=names, y=[1e6 * seconds[n] for n in names],
                           marker_color=[_bar_colour(n, i) for i, n in enumerate(names)]))
    fig.update_layout(title="decision latency", yaxis={"title": "µs per decision"}, xaxis=category_axis(names),
                      height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
