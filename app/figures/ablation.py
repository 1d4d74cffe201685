"""The ExitTrain ablation's chart: each arm's paired gain in E = 1 + C against the training step, with its s.e.

The rows are read from an ablation.json (scripts/exit_train_ablation_report.py); nothing is computed here but
the choice of rows.
"""

from __future__ import annotations

import plotly.graph_objects as go


def ablation_figure(rows: list[dict], against: str, temperature: float, budget: int) -> go.Figure:
    """Gain (%) over the start or over the lambda-0 twin, per arm, against the step; error bars are 1 s.e."""
    fig = go.Figure()
    chosen = [r for r in rows if r["against"] == against and r["temperature"] == temperature and r["budget"] == budget]
    for arm in sorted({r["arm"] for r in chosen}):
        part = sorted((r for r in chosen if r["arm"] == arm), key=lambda r: r["step"])
        fig.add_trace(go.Scatter(x=[r["step"] for r in part], y=[r["gain_pct"] for r in part], mode="lines+markers",
                                 name=arm, error_y={"type": "data", "array": [r["gain_se_pct"] for r in part]}))
    fig.add_hline(y=0, line_dash="dot", line_color="#888")
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      title=f"paired gain in E over {'the starting drafter' if against == 'start' else 'the lambda-0 twin'}"
                            f" (T = {temperature:g}, budget {budget})",
                      xaxis_title="training step", yaxis_title="gain in E = 1 + C (%)")
    return fig
