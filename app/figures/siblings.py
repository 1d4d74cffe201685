"""Sibling diagnostics as bar charts: which (depth, sibling rank) nodes end on the accepted path, and what follows
an accepted node that was not the drafter's top-1. The shares are `tevcore.lab.siblings`' tables, read as given;
each bar is labelled with its counts, so a share of 0 (no bar) still shows how many nodes it stands for."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from figures.common import category_axis

RANK_SHOWN = 4  # ranks past this pool into one "rank 4+" bar, as the CLI table does

MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def _depth_labels(depths) -> list[str]:
    return [f"depth {int(d)}" for d in sorted(set(depths))]


def sibling_rank_figure(by_rank: pd.DataFrame) -> go.Figure:
    """Per depth (categories), one bar per sibling rank: the share of such nodes that were accepted."""
    fig = go.Figure()
    labels = _depth_labels(by_rank["depth"]) if len(by_rank) else []
    if len(by_rank):
        pooled = by_rank.assign(rank=by_rank["rank"].clip(upper=RANK_SHOWN))
        sums = pooled.groupby(["depth", "rank"], as_index=False)[["nodes", "accepted"]].sum()
        for rank in sorted(sums["rank"].unique()):
            rows = sums[sums["rank"] == rank]
            name = f"rank {rank}" + ("+" if rank == RANK_SHOWN else "") + (" (top-1)" if rank == 0 else "")
            fig.add_trace(go.Bar(
                x=[f"depth {int(d)}" for d in rows["depth"]], y=rows["accepted"] / rows["nodes"], name=name,
                customdata=rows[["accepted", "nodes"]].to_numpy(), textposition="outside",
                text=[f"{a}/{n}" for a, n in zip(rows["accepted"], rows["nodes"])],
                hovertemplate=name + ", %{x}: %{y:.3f} (%{customdata[0]} of %{customdata[1]} nodes)<extra></extra>"))
    fig.update_layout(title="accepted share by (depth, sibling rank)", barmode="group", height=300, margin=MARGIN,
                      xaxis=category_axis(labels), yaxis={"title": "share on the accepted path", "range": [0, 1.15]},
                      legend={"title": {"text": "sibling rank (by draft q)"}})
    return fig


def after_pick_figure(after: pd.DataFrame) -> go.Figure:
    """Per depth (categories): how often the next depth was accepted after a top-1 pick, and after another one."""
    fig = go.Figure()
    labels = _depth_labels(after["depth"]) if len(after) else []
    for pick, colour in (("top-1", "#60a5fa"), ("other", "#f59e0b")):
        rows = after[after["pick"] == pick] if len(after) else after
        if not len(rows):
            continue
        fig.add_trace(go.Bar(
            x=[f"depth {int(d)}" for d in rows["depth"]], y=rows["share"], name=f"after a {pick} pick",
            marker_color=colour, customdata=rows[["next_accepted", "rounds"]].to_numpy(), textposition="outside",
            text=[f"{a}/{n}" for a, n in zip(rows["next_accepted"], rows["rounds"])],
            hovertemplate=f"after a {pick} pick, " + "%{x}: %{y:.3f} (%{customdata[0]} of %{customdata[1]} rounds)"
                          "<extra></extra>"))
    fig.update_layout(title="next depth accepted after the accepted node's pick", barmode="group", height=300,
                      margin=MARGIN, xaxis=category_axis(labels), yaxis={"title": "share", "range": [0, 1.15]},
                      showlegend=True)
    return fig
