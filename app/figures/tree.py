"""The draft tree as a node-link figure: layout by depth, colour = P(v), ring = X(v), path, exit, bonus."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from figures.common import BONUS_COLOUR, EXIT_COLOUR, PATH_COLOUR, X_RING_COLOUR, short

LABELLED_NODES = 24  # text labels on this many nodes (largest P first); the others keep their hover


def tree_graph(tree) -> nx.DiGraph:
    """The draft tree as a networkx DiGraph (edges parent -> child), with depth attributes."""
    graph = nx.DiGraph()
    depths = tree.depths.tolist()
    for node in range(tree.num_nodes):
        graph.add_node(node, depth=int(depths[node]))
    for child, parent in enumerate(tree.parents.tolist()[1:], start=1):
        graph.add_edge(int(parent), child)
    return graph


def tree_layout(tree, keep: set[int] | None = None) -> dict[int, tuple[float, float]]:
    """Node -> (x, y): x = depth; leaves take consecutive heights in depth-first order.

    `keep` (ancestor-closed, with the root) lays out only those nodes, so a cut tree uses the whole height.
    """
    graph = tree_graph(tree)
    if keep is not None:
        graph = graph.subgraph(keep)
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


def top_nodes(tree, flow, count: int, always: Sequence[int] = ()) -> list[int]:
    """The `count` nodes of largest P(v), plus `always` and every ancestor, in node order.

    P never grows down a path, so the top nodes by P already hang together; the
    ancestors are added anyway so the result is always a tree.
    """
    P = flow.path_prob.tolist()
    order = sorted(range(tree.num_nodes), key=lambda v: (-P[v], int(tree.depths[v]), v))
    chosen = set(order[:max(1, count)]) | {int(v) for v in always if 0 <= int(v) < tree.num_nodes}
    parents = tree.parents.tolist()
    for v in list(chosen):
        while v > 0:
            v = parents[v]
            chosen.add(v)
    return sorted(chosen)


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
                title: str | None = None, show_x_values: bool = False, show_top: int | None = None,
                label_top: int = LABELLED_NODES) -> go.Figure:
    """The draft tree by depth: colour = P(v), red ring size = X(v), accepted path and exit marked.

    `path` may be a partial path (for step-by-step walks); `bonus_text` is drawn
    as a green diamond after the exit node. Big trees stay readable: only the
    `label_top` nodes of largest P carry a text label (every node has its hover),
    and `show_top` draws only the top nodes by P (with the path, exit and
    selected node).
    """
    n = tree.num_nodes
    path = list(path or [])
    marked = path + [v for v in (exit_node, selected) if v is not None]
    shown = top_nodes(tree, flow, show_top, marked) if show_top is not None and show_top < n else list(range(n))
    keep = set(shown)
    pos = tree_layout(tree, keep if len(shown) < n else None)
    ranks = sibling_ranks(tree)
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
        for child in shown[1:]:
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

    xs = [pos[v][0] for v in shown]
    ys = [pos[v][1] for v in shown]
    hover = []
    for v in shown:
        text = token_texts[v] if v < len(token_texts) else "?"
        missing = _missing_summary(missing_texts, flow.missing_probs, v, k=5)
        hover.append(
            f"<b>node {v}</b> {html.escape(repr(text))} (depth {int(tree.depths[v])})<br>"
            f"draft log q = {logq[v]:.3f}, rank {ranks[v]} among siblings<br>"
            f"a = {a[v]:.4f}   P = {P[v]:.4f}<br>m = {m[v]:.4f}   X = {X[v]:.4f}"
            + (f"<br>top missing: {html.escape(missing)}" if missing else ""))
    # X(v): an open red ring whose size grows with sqrt(X), drawn at every node
    ring = [14 + 34 * math.sqrt(max(X[v], 0.0)) for v in shown]
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers", name="exit mass X(v) (ring size)", hoverinfo="skip",
        marker={"symbol": "circle-open", "size": ring, "color": X_RING_COLOUR, "line": {"width": 2}}))
    labelled = set(top_nodes(tree, flow, label_top, marked)) if label_top < len(shown) else keep
    labels = []
    for v in shown:
        label = short(token_texts[v] if v < len(token_texts) else "?", 8) if v in labelled else ""
        labels.append(f"{label} ({X[v]:.2f})" if show_x_values and label else label)
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers+text", name="node (colour = P(v))", text=labels,
        textposition="top center", textfont={"size": 11}, hovertext=hover, hoverinfo="text",
        customdata=shown,
        marker={"size": 11, "color": [P[v] for v in shown], "cmin": 0.0, "cmax": 1.0, "colorscale": "Viridis",
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
    if selected is not None and selected in keep:
        sx, sy = pos[selected]
        fig.add_trace(go.Scatter(
            x=[sx], y=[sy], mode="markers", name=f"selected node {selected}", hoverinfo="skip",
            marker={"symbol": "square-open", "size": 22, "color": "#1f77b4", "line": {"width": 3}}))
    children = tree.children()
    leaves = sum(1 for v in shown if not any(k in keep for k in children[v]))
    if len(shown) < n:
        title = f"{title or ''} · top {len(shown)} of {n} nodes by P".lstrip(" ·")
    fig.update_layout(
        title=title, height=int(min(1600, max(400, 22 * leaves + 160))), margin={"l": 10, "r": 10, "t": 70, "b": 10},
        xaxis={"dtick": 1, "tickprefix": "depth ", "range": [-0.3, tree.max_depth + 1.5],
               "zeroline": False, "side": "top"},
        yaxis={"visible": False}, legend={"orientation": "h", "y": -0.01, "yanchor": "top"},
        hovermode="closest", clickmode="event+select", dragmode="pan")
    return fig


def record_tree_figure(record, selected: int | None = None, title: str | None = None,
                       show_top: int | None = None) -> go.Figure:
    """The tree figure of one recorded round."""
    if title is None:
        title = (f"round {record.index}: {record.tree.size} nodes, 1 + C = {record.expected_length:.2f}, "
                 f"block length {record.block_length}")
    return tree_figure(record.tree, record.flow, record.token_texts, missing_texts=record.missing_texts,
                       path=record.path, exit_node=record.exit_node, bonus_text=record.bonus_text,
                       selected=selected, title=title, show_top=show_top)
