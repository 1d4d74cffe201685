"""ExitTrain figures: training curves and E per budget of compared checkpoints."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from figures.common import budget_axis


LOSS_TERMS = ("loss", "distill", "tree")  # total, distillation term, ExitTrain tree term (metrics.jsonl)
EXPECTED_COLUMNS = ("tree_E",)  # 1 + C of the trees the drafter builds during training


def training_curves_figure(metrics: pd.DataFrame) -> go.Figure:
    """Loss terms and the training-tree expected block length against the step."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("loss terms", "expected block length (training trees)"))
    if "step" in metrics and len(metrics):
        loss_cols = [c for c in metrics.columns if c in LOSS_TERMS or "loss" in c.lower()]
        for col in loss_cols:
            part = metrics[["step", col]].dropna()
            fig.add_trace(go.Scatter(x=part["step"], y=part[col], mode="lines", name=col), row=1, col=1)
        e_cols = [c for c in metrics.columns if c in EXPECTED_COLUMNS or "expected" in c.lower()]
        for col in e_cols:
            part = metrics[["step", col]].dropna()
            fig.add_trace(go.Scatter(x=part["step"], y=part[col], mode="lines+markers", name=col), row=1, col=2)
    fig.update_xaxes(title_text="step")
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def eval_figure(rows: pd.DataFrame) -> go.Figure:
    """E = 1 + C per budget, one line per checkpoint (and proposer variant: alone, + lookup, dashed), with its
    standard error as error bars when given."""
    fig = go.Figure()
    if len(rows):
        keys = ["checkpoint", "proposer"] if "proposer" in rows else ["checkpoint"]
        for key, part in rows.groupby(keys, sort=False):
            key = key if isinstance(key, tuple) else (key,)
            part = part.sort_values("budget")
            bars = {"type": "data", "array": part["E s.e."].fillna(0).tolist()} if "E s.e." in part else None
            dashed = len(key) > 1 and "lookup" in str(key[1])
            fig.add_trace(go.Scatter(x=part["budget"], y=part["E"], mode="lines+markers", name=" ".join(map(str, key)),
                                     error_y=bars, line={"dash": "dash" if dashed else "solid"}))
    fig.update_layout(title="E = 1 + C per budget", xaxis=budget_axis(rows["budget"] if len(rows) else [], "budget"),
                      yaxis={"title": "E"}, height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
