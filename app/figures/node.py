"""One round up close: one node's next-token law p(.|v) and the round's stage timings."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, category_axis, distinct, short


def node_distribution(record, node: int) -> pd.DataFrame:
    """p(.|v) as recorded: every tree child of v, the top missing tokens and one 'other' bucket."""
    tree, flow = record.tree, record.flow
    rows = []
    for child in tree.children()[node]:
        rows.append({"token": record.token_texts[child], "token_id": int(tree.tokens[child]),
                     "prob": float(flow.edge_prob[child]), "kind": "tree child"})
    texts = record.missing_texts[node] if node < len(record.missing_texts) else []
    for i, (tok, p) in enumerate(zip(flow.missing_tokens[node].tolist(), flow.missing_probs[node].tolist())):
        if p > 0:
            rows.append({"token": texts[i] if i < len(texts) else str(tok), "token_id": int(tok),
                         "prob": float(p), "kind": "missing"})
    other = max(0.0, 1.0 - sum(r["prob"] for r in rows))
    if other > 1e-9:
        rows.append({"token": "(other)", "token_id": -1, "prob": other, "kind": "other"})
    frame = pd.DataFrame(rows, columns=["token", "token_id", "prob", "kind"])
    return frame.sort_values("prob", ascending=False, kind="stable").reset_index(drop=True)


def next_token_figure(rows: pd.DataFrame, title: str = "p(.|v)") -> go.Figure:
    """Bars of p(.|v): tree children, missing tokens and the rest, each in its own colour, largest first.

    The x axis is categorical: every bar keeps its place whatever its token looks like.
    """
    colours = {"tree child": "#1f77b4", "missing": EXIT_COLOUR, "other": "#9e9e9e"}
    labels = distinct([short(t, 14) + ("" if kind == "other" else f" #{i}")
                       for t, i, kind in zip(rows["token"], rows["token_id"], rows["kind"])])
    fig = go.Figure()
    for kind, colour in colours.items():
        part = [i for i, k in enumerate(rows["kind"]) if k == kind]
        if part:
            fig.add_trace(go.Bar(x=[labels[i] for i in part], y=[float(rows["prob"].iloc[i]) for i in part],
                                 name=kind, marker_color=colour,
                                 hovertemplate="%{x}: %{y:.4f}<extra>" + kind + "</extra>"))
    fig.update_layout(title=title, yaxis={"title": "probability", "range": [0, 1]}, barmode="overlay",
                      height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10}, xaxis=category_axis(labels))
    return fig


# ---------------------------------------------------------------- one round

def timings_figure(record) -> go.Figure:
    """Stage timings of one round, in milliseconds."""
    from tevcore.studio.explorer import STAGES

    values = [1000 * float(getattr(record.timings, s)) for s in STAGES]
    fig = go.Figure(go.Bar(x=values, y=list(STAGES), orientation="h", marker_color="#6366f1",
                           hovertemplate="%{y}: %{x:.2f} ms<extra></extra>"))
    fig.update_layout(title=f"stage timings (total {1000 * record.timings.total:.1f} ms)", height=260,
                      xaxis={"title": "ms"}, yaxis={"autorange": "reversed"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
