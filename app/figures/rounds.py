"""Across rounds: block lengths against 1 + C, where rounds exit, speed, the text coloured by round."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from figures.common import EXIT_COLOUR, ROUND_COLOURS
from tevcore.studio.rules import OPTIMAL, standing


def x_is_its_law(verifier: str, temperature: float) -> bool:
    """Whether the exit law X is `verifier`'s own law at `temperature` (the optimal rules')."""
    return standing(verifier, temperature) == OPTIMAL


def emitted_figure(records) -> go.Figure:
    """Realised block length per round (bars) against 1 + C (line)."""
    idx = [r.index for r in records]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=idx, y=[r.emitted for r in records], name="realised block length",
                         marker_color="#60a5fa"))
    fig.add_trace(go.Scatter(x=idx, y=[r.expected_length for r in records], name="1 + C",
                             mode="lines+markers", line={"color": EXIT_COLOUR}))
    if records:
        mean_l = np.mean([r.emitted for r in records])
        mean_e = np.mean([r.expected_length for r in records])
        title = f"block length per round (mean {mean_l:.2f} vs mean 1 + C {mean_e:.2f})"
    else:
        title = "block length per round"
    fig.update_layout(title=title, xaxis={"title": "round"}, yaxis={"title": "tokens"}, height=300,
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def exit_mass_by_depth(records) -> pd.DataFrame:
    """Mean exit mass X summed per depth over rounds, and the realised exit-depth frequency."""
    depth_max = max((r.tree.max_depth for r in records), default=0)
    mass = np.zeros(depth_max + 1)
    realised = np.zeros(depth_max + 1)
    for r in records:
        d = r.tree.depths.numpy()
        mass += np.bincount(d, weights=r.flow.exit_mass.double().numpy(), minlength=depth_max + 1)
        if r.exit_node is not None:
            realised[int(r.tree.depths[r.exit_node])] += 1
    count = max(len(records), 1)
    return pd.DataFrame({"depth": np.arange(depth_max + 1), "mean X": mass / count,
                         "realised exit frequency": realised / count})


def exit_depth_figure(records) -> go.Figure:
    """Where the rounds exit: analytic mean exit mass per depth vs realised exit depths.

    X is the exit law of the optimal rules only: for any other verifier the legend and title say that the bars are
    not its law (a proposal-ratio rule's own law needs each round's node logits, which a live run does not keep).
    """
    table = exit_mass_by_depth(records)
    others = sorted({r.verifier for r in records if r.verifier and not x_is_its_law(r.verifier, r.temperature)})
    law = "exit law X of the optimal rules" + (f", not {', '.join(others)}'s" if others else "")
    fig = go.Figure()
    fig.add_trace(go.Bar(x=table["depth"], y=table["mean X"], name=f"mean X (analytic): {law}",
                         marker_color="#f87171"))
    fig.add_trace(go.Scatter(x=table["depth"], y=table["realised exit frequency"], mode="markers+lines",
                             name="realised exit depth", line={"color": "#111827"}))
    fig.update_layout(title="exit mass by depth" + (f" (bars: X, not {', '.join(others)}'s law)" if others else ""),
                      legend={"orientation": "h", "y": -0.3}, xaxis={"title": "depth", "dtick": 1},
                      yaxis={"title": "probability"}, height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def speed_table(records) -> pd.DataFrame:
    """Cumulative tokens and seconds (stage timings) after each round."""
    tokens = np.cumsum([len(r.emitted_tokens) for r in records]) if records else np.zeros(0)
    seconds = np.cumsum([r.timings.total for r in records]) if records else np.zeros(0)
    speed = np.divide(tokens, seconds, out=np.zeros(len(tokens)), where=seconds > 0)
    return pd.DataFrame({"round": [r.index for r in records], "tokens": tokens, "seconds": seconds,
                         "tokens/s": speed})


def speed_figure(records) -> go.Figure:
    """Tokens per second so far, after each round."""
    table = speed_table(records)
    fig = go.Figure(go.Scatter(x=table["round"], y=table["tokens/s"], mode="lines+markers",
                               line={"color": "#059669"}, name="tokens/s so far"))
    last = float(table["tokens/s"].iloc[-1]) if len(table) else 0.0
    fig.update_layout(title=f"speed so far: {last:.1f} tokens/s", xaxis={"title": "round"},
                      yaxis={"title": "tokens/s"}, height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def text_by_round_html(records) -> str:
    """Generated text with one background colour per round (HTML; text escaped)."""
    spans = []
    for r in records:
        colour = ROUND_COLOURS[r.index % len(ROUND_COLOURS)]
        text = html.escape(r.emitted_text).replace("\n", "<br>")
        spans.append(f'<span title="round {r.index}: {len(r.emitted_tokens)} tokens" '
                     f'style="background:{colour};border-radius:3px;padding:0 1px">{text}</span>')
    return '<div style="font-family:monospace;line-height:1.7;white-space:pre-wrap">' + "".join(spans) + "</div>"
