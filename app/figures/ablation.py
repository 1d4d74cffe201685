"""The ExitTrain ablation's chart: each arm's paired gain in E = 1 + C against the training step, with its s.e.

The rows are read from an ablation.json (scripts/exit_train_ablation_report.py); nothing is computed here but
the choice of rows.
"""

from __future__ import annotations

import plotly.colors
import plotly.graph_objects as go

# one colour per arm in every view (the start, the twin, any T and budget): an arm keeps its colour whichever arms
# a view shows; a lambda > 0 arm is the lighter shade of its lambda-0 twin
REFERENCE = "reference"  # the report's arm name for a drafter scored against the start that no arm trained
ARM_COLOURS = {"soft-0": "#1f77b4", "soft-0.1": "#7fb3e0", "hard-0": "#d62728", "hard-0.1": "#f0918f",
               "t1-soft-0": "#2ca02c", "t1-soft-0.1": "#8fd18f", "t1-hard-0": "#9467bd", "t1-hard-0.1": "#c9b1e0",
               "reference": "#555555"}


def arm_colour(arm: str) -> str:
    """The arm's colour: its own, or for an arm of another name one of plotly's palette chosen by the name."""
    palette = plotly.colors.qualitative.Dark24
    return ARM_COLOURS.get(arm) or palette[sum(arm.encode()) % len(palette)]


def ablation_figure(rows: list[dict], against: str, temperature: float, budget: int) -> go.Figure:
    """Gain (%) over the start or over the lambda-0 twin, per arm, against the step; error bars are 1 s.e.

    A reference drafter scored against the start (the committed drafter beside a naive start) was not trained in
    the run, so it has no step: it is written in the corner, not drawn at step 0 (where a gain ten times the
    arms' would also squash their lines)."""
    fig = go.Figure()
    chosen = [r for r in rows if r["against"] == against and r["temperature"] == temperature and r["budget"] == budget]
    for row in (r for r in chosen if r["arm"] == REFERENCE):
        fig.add_annotation(text=f"{REFERENCE} drafter: {row['gain_pct']:+.1f}% (s.e. {row['gain_se_pct']:.1f})",
                           xref="paper", yref="paper", x=0.01, y=0.99, xanchor="left", yanchor="top",
                           showarrow=False, font={"color": arm_colour(REFERENCE)})
    for arm in sorted({r["arm"] for r in chosen} - {REFERENCE}):
        part = sorted((r for r in chosen if r["arm"] == arm), key=lambda r: r["step"])
        fig.add_trace(go.Scatter(x=[r["step"] for r in part], y=[r["gain_pct"] for r in part], mode="lines+markers",
                                 name=arm, line={"color": arm_colour(arm)}, marker={"color": arm_colour(arm)},
                                 error_y={"type": "data", "array": [r["gain_se_pct"] for r in part],
                                          "color": arm_colour(arm)}))
    fig.add_hline(y=0, line_dash="dot", line_color="#888")
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      title=f"paired gain in E over {'the starting drafter' if against == 'start' else 'the lambda-0 twin'}"
                            f" (T = {temperature:g}, budget {budget})",
                      xaxis_title="training step", yaxis_title="gain in E = 1 + C (%)")
    return fig
