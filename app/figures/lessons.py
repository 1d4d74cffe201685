"""The Lessons page's figures: a lesson's truth as bars (the answer's bar marked), and the host's view of the
room's predictions against the truth."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from figures.common import BONUS_COLOUR, EXIT_COLOUR, category_axis, distinct, number_text

SERIES_COLOURS = ("#3b82f6", "#f59e0b", "#10b981", "#a855f7")
MARK_COLOUR = EXIT_COLOUR


def lesson_bars_figure(bars) -> go.Figure:
    """The truth's bars (a `tevcore.studio.lessons.Bars`): one colour per series, error bars (1.96 s.e.) where
    counted, and the category the question is about outlined and named below the axis."""
    labels = distinct(bars.labels)
    marked = labels[list(bars.labels).index(bars.marked)] if bars.marked in bars.labels else None
    fig = go.Figure()
    for i, (name, values) in enumerate(bars.series.items()):
        errors = bars.errors.get(name)
        fig.add_trace(go.Bar(
            x=labels, y=list(values), name=name, marker_color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
            marker_line={"color": [MARK_COLOUR if label == marked else "rgba(0,0,0,0)" for label in labels],
                         "width": 3},
            text=[number_text(v, 3) for v in values], textposition="outside",
            error_y={"type": "data", "array": [1.96 * e for e in errors]} if errors else None))
    fig.update_layout(barmode="group", title=bars.title, height=380, showlegend=len(bars.series) > 1,
                      yaxis={"title": bars.y_title, "rangemode": "tozero"},
                      xaxis=category_axis(labels, ticktext=[f"<b>{label}</b> ◀" if label == marked else label
                                                            for label in labels], tickvals=labels),
                      legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
                      margin={"l": 10, "r": 10, "t": 70, "b": 10})
    return fig


def predictions_figure(predictions: Sequence, truth, choices: Sequence[str] | None = None,
                       tolerance: float = 0.0, title: str = "the room's predictions") -> go.Figure:
    """The room's predictions against the truth: counts per choice (the true one green) for a choice question;
    for a number, a histogram with the truth as a line and its tolerance as a band."""
    fig = go.Figure()
    if choices is not None:
        counts = [sum(1 for p in predictions if p == c) for c in choices]
        labels = distinct(choices)
        fig.add_trace(go.Bar(x=labels, y=counts, name="predictions", text=counts, textposition="outside",
                             marker_color=[BONUS_COLOUR if c == truth else "#94a3b8" for c in choices]))
        fig.update_layout(xaxis=category_axis(labels))
    else:
        values = [float(p) for p in predictions]
        fig.add_trace(go.Histogram(x=values, name="predictions", marker_color="#94a3b8", nbinsx=20))
        if tolerance > 0:
            fig.add_vrect(x0=float(truth) - tolerance, x1=float(truth) + tolerance, fillcolor=BONUS_COLOUR,
                          opacity=0.15, line_width=0)
        fig.add_vline(x=float(truth), line_color=BONUS_COLOUR, line_width=3,
                      annotation_text=f"truth {number_text(float(truth), 3)}", annotation_position="top")
        fig.update_layout(xaxis={"title": "prediction"})
    fig.update_layout(title=f"{title} ({len(predictions)} answered)", height=300, showlegend=False,
                      yaxis={"title": "participants", "rangemode": "tozero"},
                      margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig
