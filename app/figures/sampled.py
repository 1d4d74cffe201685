"""Sampled-tree figures: TEV's exit law against rrs's outcomes on one realised tree, and E[L] against E[1 + C].

Node and rule labels sit on category axes (`category_axis`), so a label that
looks like a number never turns the axis numeric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, category_axis, distinct
from tevcore.studio.rules import FOIL, OPTIMAL, OVER_DRAWS, OWN_LAW, RULES, T0_ONLY

RRS_COLOUR = "#9467bd"
OPTIMAL_COLOUR = "#1f77b4"
STANDING_COLOURS = {OPTIMAL: OPTIMAL_COLOUR, OWN_LAW: "#17becf", T0_ONLY: "#8c564b", OVER_DRAWS: RRS_COLOUR,
                    FOIL: EXIT_COLOUR}
STANDING_LEGEND = {OPTIMAL: "exact given the tree (optimal: its E[L] is 1 + C)", OWN_LAW: "exact, with its own law",
                   T0_ONLY: "exact for T = 0 only", OVER_DRAWS: "exact over the tree's draws",
                   FOIL: "NOT exact (teaching foil)", None: "not a registered rule"}


def rule_standing(name: str) -> str | None:
    """A registered rule's standing (constant for the foil and the proposal-ratio rules); None for another name."""
    return RULES[name].standing(1.0) if name in RULES else None


def tev_against_rrs_figure(node_labels: Sequence[str], exit_law: Sequence[float], rrs_law: Sequence[float],
                           rrs_freq: Sequence[float], top: int = 25) -> go.Figure:
    """On one sampled tree: TEV's exit law X(v) and rrs's own law as bars, rrs's empirical exit frequencies as
    markers, on the nodes either law visits most."""
    exit_law, rrs_law = np.asarray(exit_law, dtype=float), np.asarray(rrs_law, dtype=float)
    order = np.argsort(-np.maximum(exit_law, rrs_law), kind="stable")[:top]
    xs = distinct([node_labels[i] for i in order])
    fig = go.Figure()  # overlaid: rrs's narrow bar and its markers sit in the middle of TEV's wide one
    fig.add_trace(go.Bar(x=xs, y=exit_law[order].tolist(), name="TEV's exit law X(v) (this tree)", width=0.8,
                         marker_color="#d1d5db", marker_line={"color": "#111827", "width": 1}))
    fig.add_trace(go.Bar(x=xs, y=rrs_law[order].tolist(), name="rrs's own law (this tree)", width=0.35,
                         marker_color="rgba(148, 103, 189, 0.45)", marker_line={"color": RRS_COLOUR, "width": 1}))
    fig.add_trace(go.Scatter(x=xs, y=np.asarray(rrs_freq, dtype=float)[order].tolist(), mode="markers",
                             name="rrs: empirical", marker={"color": RRS_COLOUR, "size": 10, "symbol": "diamond",
                                                            "line": {"width": 1, "color": "white"}}))
    fig.update_layout(title="one realised tree: TEV's exit law against rrs's outcomes", barmode="overlay",
                      yaxis={"title": "probability of exiting here"},
                      xaxis=category_axis(xs, title=f"exit node (top {len(order)})"), height=400,
                      legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
                      margin={"l": 10, "r": 10, "t": 90, "b": 10})
    return fig


def rounds_length_figure(lengths: Mapping[str, tuple[float, float]], yardstick: tuple[float, float],
                         labels: Mapping[str, str] | None = None,
                         reference: tuple[str, float] | None = None) -> go.Figure:
    """Each rule's E[L] over the rounds (error bars: 1.96 standard errors) against the rounds' E[1 + C] (a line,
    its band 1.96 standard errors wide): every rule verified the same trees. `reference` (label, value) is a
    dotted line for another design, e.g. the fixed best-first tree with TEV at the same budget."""
    labels = labels or {}
    names = list(lengths)
    xs = distinct([labels.get(n, n) for n in names])
    mean_c, se_c = yardstick
    fig = go.Figure()
    fig.add_hrect(y0=mean_c - 1.96 * se_c, y1=mean_c + 1.96 * se_c, fillcolor="rgba(0, 0, 0, 0.08)", line_width=0)
    fig.add_hline(y=mean_c, line={"color": "black", "dash": "dash", "width": 2},
                  annotation_text=f"E[1 + C] of the realised trees = {mean_c:.3f}", annotation_position="bottom right")
    if reference is not None:
        fig.add_hline(y=reference[1], line={"color": "#2ca02c", "dash": "dot", "width": 2},
                      annotation_text=f"{reference[0]} = {reference[1]:.3f}", annotation_position="top left")
    standings = [rule_standing(n) for n in names]
    colours = [STANDING_COLOURS.get(s, OPTIMAL_COLOUR) for s in standings]
    fig.add_trace(go.Scatter(x=xs, y=[lengths[n][0] for n in names], mode="markers", name="E[L] (one verdict a round)",
                             error_y={"type": "data", "array": [1.96 * lengths[n][1] for n in names]},
                             marker={"color": colours, "size": 12, "symbol": "diamond"}, showlegend=False))
    for kind in dict.fromkeys(standings):  # the colour legend: one entry per standing shown, in the order met
        fig.add_trace(go.Scatter(x=xs[:1], y=[None], mode="markers", name=STANDING_LEGEND[kind],  # draws nothing
                                 marker={"color": STANDING_COLOURS.get(kind, OPTIMAL_COLOUR), "size": 12,
                                         "symbol": "diamond"}))
    fig.update_layout(title="across rounds: each rule's E[L] against E[1 + C] of the same trees",
                      yaxis={"title": "tokens per round", "rangemode": "tozero"}, xaxis=category_axis(xs),
                      height=420, showlegend=True, legend={"title": {"text": "colour = standing"},
                                                           "orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
                      margin={"l": 10, "r": 10, "t": 100, "b": 10})
    return fig
