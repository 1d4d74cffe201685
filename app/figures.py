"""Pure figure builders for the app: records and plain data in, plotly figures out.

No streamlit here, so every figure can be unit-tested on records. The tree is
laid out with networkx by depth (x = depth, y = leaf order, a parent sits at
the mean height of its children). Nothing in this module computes target
flow: a, P, m and X are read from `TargetFlow` objects the engine produced.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go

PATH_COLOUR = "#ff7f0e"
EXIT_COLOUR = "#d62728"
BONUS_COLOUR = "#2ca02c"
X_RING_COLOUR = "rgba(214, 39, 40, 0.85)"
ROUND_COLOURS = ("#dbeafe", "#fde68a", "#dcfce7", "#fce7f3", "#e0e7ff", "#ffedd5", "#ccfbf1", "#f3e8ff")
NAIVE_NAME = "naive_ratio"


def short(text: str, width: int = 10) -> str:
    """A token's text made visible: whitespace shown, long tokens cut."""
    shown = repr(text)[1:-1] if text is not None else "?"
    return shown if len(shown) <= width else shown[: width - 1] + "…"


# ---------------------------------------------------------------- tree structure

def tree_graph(tree) -> nx.DiGraph:
    """The draft tree as a networkx DiGraph (edges parent -> child), with depth attributes."""
    graph = nx.DiGraph()
    depths = tree.depths.tolist()
    for node in range(tree.num_nodes):
        graph.add_node(node, depth=int(depths[node]))
    for child, parent in enumerate(tree.parents.tolist()[1:], start=1):
        graph.add_edge(int(parent), child)
    return graph


def tree_layout(tree) -> dict[int, tuple[float, float]]:
    """Node -> (x, y): x = depth; leaves take consecutive heights in depth-first order."""
    graph = tree_graph(tree)
    heights: dict[int, float] = {}
    leaf = 0
    for node in nx.dfs_postorder_nodes(graph, 0, sort_neighbors=sorted):
        kids = list(graph.successors(node))
        if kids:
            heights[node] = float(np.mean([heights[k] for k in kids]))
        else:
            heights[node] = float(leaf)
            leaf += 1
    return {node: (float(graph.nodes[node]["depth"]), -heights[node]) for node in graph.nodes}


def sibling_ranks(tree) -> list[int]:
    """Rank of each node's draft log-prob among its siblings (1 = the drafter's favourite; root 1)."""
    ranks = [1] * tree.num_nodes
    logq = tree.draft_logp.tolist()
    for kids in tree.children():
        for rank, node in enumerate(sorted(kids, key=lambda k: -logq[k]), start=1):
            ranks[node] = rank
    return ranks


def _missing_summary(missing_texts, missing_probs, node: int, k: int = 3) -> str:
    if missing_texts is None or node >= len(missing_texts):
        return ""
    probs = missing_probs[node].tolist() if missing_probs is not None else []
    return ", ".join(f"{short(t, 12)} {p:.3f}" for t, p in list(zip(missing_texts[node], probs))[:k])


def node_table(record) -> pd.DataFrame:
    """One row per node of a round: structure, draft score, flow and verdict."""
    tree, flow = record.tree, record.flow
    ranks = sibling_ranks(tree)
    on_path = set(record.path or [])
    rows = []
    for node in range(tree.num_nodes):
        rows.append({
            "node": node,
            "depth": int(tree.depths[node]),
            "parent": int(tree.parents[node]),
            "token": record.token_texts[node] if node < len(record.token_texts) else str(int(tree.tokens[node])),
            "token_id": int(tree.tokens[node]),
            "log q": float(tree.draft_logp[node]),
            "rank": ranks[node],
            "a": float(flow.edge_prob[node]),
            "P": float(flow.path_prob[node]),
            "m": float(flow.child_mass[node]),
            "X": float(flow.exit_mass[node]),
            "top missing": _missing_summary(record.missing_texts, flow.missing_probs, node),
            "accepted": node in on_path,
            "exit": node == record.exit_node,
        })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- the tree figure

def tree_figure(tree, flow, token_texts: Sequence[str], *, missing_texts=None, path: Sequence[int] | None = None,
                exit_node: int | None = None, bonus_text: str | None = None, selected: int | None = None,
                title: str | None = None, show_x_values: bool = False) -> go.Figure:
    """The draft tree by depth: colour = P(v), red ring size = X(v), accepted path and exit marked.

    `path` may be a partial path (for step-by-step walks); `bonus_text` is drawn
    as a green diamond after the exit node.
    """
    pos = tree_layout(tree)
    ranks = sibling_ranks(tree)
    n = tree.num_nodes
    path = list(path or [])
    path_edges = {(path[i], path[i + 1]) for i in range(len(path) - 1)}
    parents = tree.parents.tolist()
    P = flow.path_prob.tolist()
    X = flow.exit_mass.tolist()
    a = flow.edge_prob.tolist()
    m = flow.child_mass.tolist()
    logq = tree.draft_logp.tolist()

    fig = go.Figure()
    # edges: plain ones in one trace, accepted-path edges in another
    for on_path in (False, True):
        xs, ys = [], []
        for child in range(1, n):
            if ((parents[child], child) in path_edges) != on_path:
                continue
            x0, y0 = pos[parents[child]]
            x1, y1 = pos[child]
            xs += [x0, x1, None]
            ys += [y0, y1, None]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=on_path,
            name="accepted path" if on_path else "tree edges",
            line={"color": PATH_COLOUR if on_path else "#b0b0b0", "width": 5 if on_path else 1.2}))

    xs = [pos[v][0] for v in range(n)]
    ys = [pos[v][1] for v in range(n)]
    hover = []
    for v in range(n):
        text = token_texts[v] if v < len(token_texts) else "?"
        missing = _missing_summary(missing_texts, flow.missing_probs, v, k=5)
        hover.append(
            f"<b>node {v}</b> {html.escape(repr(text))} (depth {int(tree.depths[v])})<br>"
            f"draft log q = {logq[v]:.3f}, rank {ranks[v]} among siblings<br>"
            f"a = {a[v]:.4f}   P = {P[v]:.4f}<br>m = {m[v]:.4f}   X = {X[v]:.4f}"
            + (f"<br>top missing: {html.escape(missing)}" if missing else ""))
    # X(v): an open red ring whose size grows with sqrt(X), drawn at every node
    ring = [14 + 34 * math.sqrt(max(x, 0.0)) for x in X]
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers", name="exit mass X(v) (ring size)", hoverinfo="skip",
        marker={"symbol": "circle-open", "size": ring, "color": X_RING_COLOUR, "line": {"width": 2}}))
    labels = [short(token_texts[v] if v < len(token_texts) else "?", 8) for v in range(n)]
    if show_x_values:
        labels = [f"{lab} ({X[v]:.2f})" for v, lab in enumerate(labels)]
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers+text", name="node (colour = P(v))", text=labels,
        textposition="top center", textfont={"size": 11}, hovertext=hover, hoverinfo="text",
        customdata=list(range(n)),
        marker={"size": 11, "color": P, "cmin": 0.0, "cmax": 1.0, "colorscale": "Viridis",
                "colorbar": {"title": {"text": "P(v)"}, "thickness": 12},
                "line": {"width": 1, "color": "#333"}}))
    if exit_node is not None:
        ex, ey = pos[exit_node]
        fig.add_trace(go.Scatter(
            x=[ex], y=[ey], mode="markers", name=f"exit node {exit_node}", hoverinfo="skip",
            marker={"symbol": "star", "size": 20, "color": EXIT_COLOUR, "line": {"width": 1, "color": "black"}}))
        if bonus_text is not None:
            bx, by = ex + 0.6, ey - 0.35
            fig.add_trace(go.Scatter(
                x=[ex, bx], y=[ey, by], mode="lines", hoverinfo="skip", showlegend=False,
                line={"color": BONUS_COLOUR, "dash": "dot", "width": 2}))
            fig.add_trace(go.Scatter(
                x=[bx], y=[by], mode="markers+text", name=f"bonus token {short(bonus_text, 12)}",
                text=[f"bonus {short(bonus_text, 12)}"], textposition="middle right",
                hovertext=[f"bonus token {html.escape(repr(bonus_text))}"], hoverinfo="text",
                marker={"symbol": "diamond", "size": 14, "color": BONUS_COLOUR}))
    if selected is not None and 0 <= selected < n:
        sx, sy = pos[selected]
        fig.add_trace(go.Scatter(
            x=[sx], y=[sy], mode="markers", name=f"selected node {selected}", hoverinfo="skip",
            marker={"symbol": "square-open", "size": 22, "color": "#1f77b4", "line": {"width": 3}}))
    leaves = sum(1 for kids in tree.children() if not kids)
    fig.update_layout(
        title=title, height=int(min(1600, max(400, 30 * leaves + 160))), margin={"l": 10, "r": 10, "t": 70, "b": 10},
        xaxis={"dtick": 1, "tickprefix": "depth ", "range": [-0.3, tree.max_depth + 1.5],
               "zeroline": False, "side": "top"},
        yaxis={"visible": False}, legend={"orientation": "h", "y": -0.01, "yanchor": "top"},
        hovermode="closest", clickmode="event+select", dragmode="pan")
    return fig


def record_tree_figure(record, selected: int | None = None, title: str | None = None) -> go.Figure:
    """The tree figure of one recorded round."""
    if title is None:
        title = (f"round {record.index}: {record.tree.size} nodes, 1 + C = {record.expected_length:.2f}, "
                 f"block length {record.block_length}")
    return tree_figure(record.tree, record.flow, record.token_texts, missing_texts=record.missing_texts,
                       path=record.path, exit_node=record.exit_node, bonus_text=record.bonus_text,
                       selected=selected, title=title)


# ---------------------------------------------------------------- one node's next-token law

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
    """Bars of p(.|v): tree children, missing tokens and the rest, each in its own colour."""
    colours = {"tree child": "#1f77b4", "missing": EXIT_COLOUR, "other": "#9e9e9e"}
    fig = go.Figure()
    for kind, colour in colours.items():
        part = rows[rows["kind"] == kind]
        if len(part):
            fig.add_trace(go.Bar(x=[short(t, 14) + ("" if kind == "other" else f" #{i}")
                                    for t, i in zip(part["token"], part["token_id"])],
                                 y=part["prob"], name=kind, marker_color=colour,
                                 hovertemplate="%{x}: %{y:.4f}<extra>" + kind + "</extra>"))
    fig.update_layout(title=title, yaxis={"title": "probability", "range": [0, 1]}, barmode="group",
                      height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      xaxis={"categoryorder": "total descending"})
    return fig


# ---------------------------------------------------------------- one round

def timings_figure(record) -> go.Figure:
    """Stage timings of one round, in milliseconds."""
    from tevcore.engine.records import STAGES

    values = [1000 * float(getattr(record.timings, s)) for s in STAGES]
    fig = go.Figure(go.Bar(x=values, y=list(STAGES), orientation="h", marker_color="#6366f1",
                           hovertemplate="%{y}: %{x:.2f} ms<extra></extra>"))
    fig.update_layout(title=f"stage timings (total {1000 * record.timings.total:.1f} ms)", height=260,
                      xaxis={"title": "ms"}, yaxis={"autorange": "reversed"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


# ---------------------------------------------------------------- across rounds

def block_length_figure(records) -> go.Figure:
    """Realised block length per round (bars) against 1 + C (line)."""
    idx = [r.index for r in records]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=idx, y=[r.block_length for r in records], name="realised block length",
                         marker_color="#60a5fa"))
    fig.add_trace(go.Scatter(x=idx, y=[r.expected_length for r in records], name="1 + C",
                             mode="lines+markers", line={"color": EXIT_COLOUR}))
    if records:
        mean_l = np.mean([r.block_length for r in records])
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
    """Where the rounds exit: analytic mean exit mass per depth vs realised exit depths."""
    table = exit_mass_by_depth(records)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=table["depth"], y=table["mean X"], name="mean exit mass X (analytic)",
                         marker_color="#f87171"))
    fig.add_trace(go.Scatter(x=table["depth"], y=table["realised exit frequency"], mode="markers+lines",
                             name="realised exit depth", line={"color": "#111827"}))
    fig.update_layout(title="exit mass by depth", xaxis={"title": "depth", "dtick": 1},
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


# ---------------------------------------------------------------- verifier comparison

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


# ---------------------------------------------------------------- training

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
    """E = 1 + C per budget, one line per checkpoint, with its standard error as error bars when given."""
    fig = go.Figure()
    if len(rows):
        for name, part in rows.groupby("checkpoint", sort=False):
            part = part.sort_values("budget")
            bars = {"type": "data", "array": part["E s.e."].fillna(0).tolist()} if "E s.e." in part else None
            fig.add_trace(go.Scatter(x=part["budget"], y=part["E"], mode="lines+markers", name=str(name),
                                     error_y=bars))
    fig.update_layout(title="E = 1 + C per budget", xaxis={"title": "budget", "type": "log"},
                      yaxis={"title": "E"}, height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


# ---------------------------------------------------------------- workshop

def flow_bars_figure(labels: Sequence[str], flow) -> go.Figure:
    """P, m and X of every node side by side (the workshop's live recomputation)."""
    fig = go.Figure()
    for name, values, colour in (("P(v)", flow.path_prob, "#3b82f6"), ("m(v)", flow.child_mass, "#a3a3a3"),
                                 ("X(v)", flow.exit_mass, EXIT_COLOUR)):
        fig.add_trace(go.Bar(x=list(labels), y=values.tolist(), name=name, marker_color=colour))
    fig.update_layout(barmode="group", title=f"flow per node (sum X = {float(flow.exit_mass.sum()):.4f})",
                      yaxis={"title": "probability", "range": [0, 1.05]}, height=320,
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
