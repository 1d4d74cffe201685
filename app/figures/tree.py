"""The draft tree as a node-link figure: layout by depth, colour = P(v), ring = X(v), path, exit, bonus.

Readable on a projector: every drawn node carries its label as an annotation to the right of everything
drawn at that node (the X ring, the exit star, the selection square), the bonus token sits in a column of
its own after the deepest one, and big sibling fans fold into "+N more" nodes (`figures.folding`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from figures.common import BONUS_COLOUR, EXIT_COLOUR, PATH_COLOUR, X_RING_COLOUR, node_name, number_text, short
from figures.draws import node_draws_text
from figures.folding import FOLD_PREFIX, Fold, fold_fans
from tevcore.studio.trails import sibling_ranks

NODE_SIZE = 11
EXIT_STAR_SIZE = 20
SELECTED_SIZE = 22  # the selection square (open, line 3)
FIXED_MARK_SIZE = 19  # the open diamond around a mixed tree's fixed child (the node's P colour shows inside)
FIXED_COLOUR = "#111827"
LABEL_FONT = 12
LABEL_GAP_PX = 4  # between the widest marker at a node and its label
ROW_PX = 30  # vertical pixels per leaf: a label (12 px) never touches the one above or below


def tree_graph(tree) -> nx.DiGraph:
    """The draft tree as a networkx DiGraph (edges parent -> child), with depth attributes."""
    graph = nx.DiGraph()
    depths = tree.depths.tolist()
    for node in range(tree.num_nodes):
        graph.add_node(node, depth=int(depths[node]))
    for child, parent in enumerate(tree.parents.tolist()[1:], start=1):
        graph.add_edge(int(parent), child)
    return graph


def fold_id(tree, fold: Fold) -> int:
    """The layout id of a folded fan: after every node id, so it sits below its parent's drawn children."""
    return tree.num_nodes + fold.parent


def tree_layout(tree, keep: set[int] | None = None,
                folds: Sequence[Fold] = ()) -> dict[int, tuple[float, float]]:
    """Node -> (x, y): x = depth; leaves take consecutive heights in depth-first order.

    `keep` (ancestor-closed, with the root) lays out only those nodes, so a cut tree uses the whole height;
    each fold is one more leaf under its parent, with id `fold_id`.
    """
    graph = tree_graph(tree)
    if keep is not None:
        graph = graph.subgraph(keep).copy()
    for fold in folds:
        graph.add_node(fold_id(tree, fold), depth=graph.nodes[fold.parent]["depth"] + 1)
        graph.add_edge(fold.parent, fold_id(tree, fold))
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

def ring_size(x_mass: float) -> float:
    """Diameter in pixels of the open red ring that shows X(v): it grows with sqrt(X)."""
    return 14 + 34 * math.sqrt(max(x_mass, 0.0))


def label_shift(ring: float, exit_here: bool, selected_here: bool) -> float:
    """Pixels from a node's centre to its label: past the widest marker drawn there."""
    widest = max(NODE_SIZE + 2, ring + 2, EXIT_STAR_SIZE + 2 if exit_here else 0,
                 SELECTED_SIZE + 3 if selected_here else 0)
    return widest / 2 + LABEL_GAP_PX


def _label(fig: go.Figure, x: float, y: float, text: str, shift: float, colour: str = "#111827") -> None:
    fig.add_annotation(x=x, y=y, text=html.escape(text, quote=False), showarrow=False, xanchor="left", yanchor="middle",
                       xshift=shift, font={"size": LABEL_FONT, "color": colour})


def fixed_children(tree) -> set[int]:
    """The nodes a mixed tree fixed (point-mass draws) rather than drew from q; none on a fixed or sampled tree."""
    draws = tree.draws
    return set() if draws is None else set(draws.children[draws.fixed].tolist())


def tree_figure(tree, flow, token_texts: Sequence[str], *, missing_texts=None, path: Sequence[int] | None = None,
                exit_node: int | None = None, bonus_text: str | None = None, selected: int | None = None,
                title: str | None = None, show_x_values: bool = False, fan: int | None = None,
                opened: Sequence[int] = ()) -> go.Figure:
    """The draft tree by depth: colour = P(v), red ring size = X(v), accepted path and exit marked.

    `path` may be a partial path (for step-by-step walks); `bonus_text` is drawn as a green diamond in a
    column after the deepest drawn one, joined to the exit node. `fan` folds each sibling fan beyond its
    `fan` likeliest children into one "+N more" node (clickable: customdata "more:<parent>"), except under
    the parents in `opened`; the path, exit and selected node are always drawn.
    """
    n = tree.num_nodes
    path = list(path or [])
    marked = path + [v for v in (exit_node, selected) if v is not None]
    shown, folds = fold_fans(tree, flow, fan, marked, opened)
    keep = set(shown)
    pos = tree_layout(tree, keep if len(shown) < n else None, folds)
    ranks = sibling_ranks(tree)
    path_edges = {(path[i], path[i + 1]) for i in range(len(path) - 1)}
    parents = tree.parents.tolist()
    P = flow.path_prob.tolist()
    X = flow.exit_mass.tolist()
    a = flow.edge_prob.tolist()
    m = flow.child_mass.tolist()
    logq = tree.draft_logp.tolist()

    fig = go.Figure()
    # edges: plain ones (and those to folded fans) in one trace, accepted-path edges in another
    for on_path in (False, True):
        xs, ys = [], []
        pairs = [(parents[c], c) for c in shown[1:]]
        if not on_path:
            pairs += [(f.parent, fold_id(tree, f)) for f in folds]
        for parent, child in pairs:
            if ((parent, child) in path_edges) != on_path:
                continue
            xs += [pos[parent][0], pos[child][0], None]
            ys += [pos[parent][1], pos[child][1], None]
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
        drawn = node_draws_text(tree, v)
        hover.append(
            f"<b>{html.escape(node_name(v, text))}</b> (depth {int(tree.depths[v])})<br>"
            f"draft log q = {logq[v]:.3f}, sibling rank {ranks[v]} (0 = top-1)<br>"
            f"a = {number_text(a[v])}   P = {number_text(P[v])}<br>m = {number_text(m[v])}   X = {number_text(X[v])}"
            + (f"<br>top missing: {html.escape(missing)}" if missing else "")
            + (f"<br>{html.escape(drawn)}" if drawn else ""))
    rings = [ring_size(X[v]) for v in shown]
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers", name="exit mass X(v) (ring size)", hoverinfo="skip",
        marker={"symbol": "circle-open", "size": rings, "color": X_RING_COLOUR, "line": {"width": 2}}))
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers", name="node (colour = P(v))", hovertext=hover, hoverinfo="text",
        customdata=shown,
        marker={"size": NODE_SIZE, "color": [P[v] for v in shown], "cmin": 0.0, "cmax": 1.0, "colorscale": "Viridis",
                "colorbar": {"title": {"text": "P(v)"}, "thickness": 12},
                "line": {"width": 1, "color": "#333"}}))
    fixed = [v for v in shown if v in fixed_children(tree)]
    if fixed:
        fig.add_trace(go.Scatter(
            x=[pos[v][0] for v in fixed], y=[pos[v][1] for v in fixed], mode="markers", hoverinfo="skip",
            name="fixed child (q's top-1, chosen, not drawn)",
            marker={"symbol": "diamond-open", "size": FIXED_MARK_SIZE, "color": FIXED_COLOUR, "line": {"width": 2}}))
    for v, ring in zip(shown, rings):
        label = "root" if v == 0 else short(token_texts[v] if v < len(token_texts) else "?", 10)
        _label(fig, pos[v][0], pos[v][1], f"{label} ({X[v]:.2f})" if show_x_values else label,
               label_shift(ring, v == exit_node, v == selected))
    if folds:
        fxs = [pos[fold_id(tree, f)][0] for f in folds]
        fys = [pos[fold_id(tree, f)][1] for f in folds]
        fig.add_trace(go.Scatter(
            x=fxs, y=fys, mode="markers", name="folded siblings (click to open)",
            customdata=[f"{FOLD_PREFIX}{f.parent}" for f in folds], hoverinfo="text",
            hovertext=[f"{len(f.children)} siblings under node {f.parent} ({f.hidden} nodes with their subtrees), "
                       f"sum P = {f.mass:.4f}: click to open" for f in folds],
            marker={"symbol": "square", "size": NODE_SIZE, "color": "#e5e7eb",
                    "line": {"width": 1, "color": "#6b7280"}}))
        for f, x, y in zip(folds, fxs, fys):
            _label(fig, x, y, f.label, label_shift(NODE_SIZE, False, False), colour="#4b5563")
    depth_shown = max(int(pos[v][0]) for v in pos)
    if exit_node is not None:
        ex, ey = pos[exit_node]
        fig.add_trace(go.Scatter(
            x=[ex], y=[ey], mode="markers", name=f"exit node {exit_node}", hoverinfo="skip",
            marker={"symbol": "star", "size": EXIT_STAR_SIZE, "color": EXIT_COLOUR,
                    "line": {"width": 1, "color": "black"}}))
        if bonus_text is not None:
            bx, by = depth_shown + 1.0, ey  # its own column, after the deepest drawn one
            fig.add_trace(go.Scatter(
                x=[ex, bx], y=[ey, by], mode="lines", hoverinfo="skip", showlegend=False,
                line={"color": BONUS_COLOUR, "dash": "dot", "width": 2}))
            fig.add_trace(go.Scatter(
                x=[bx], y=[by], mode="markers", name=f"bonus token {short(bonus_text, 12)}",
                hovertext=[f"bonus token {html.escape(repr(bonus_text))}"], hoverinfo="text",
                marker={"symbol": "diamond", "size": 14, "color": BONUS_COLOUR}))
            _label(fig, bx, by, f"bonus {short(bonus_text, 12)}", label_shift(14, False, False), colour=BONUS_COLOUR)
    if selected is not None and selected in keep:
        sx, sy = pos[selected]
        fig.add_trace(go.Scatter(
            x=[sx], y=[sy], mode="markers", name=f"selected node {selected}", hoverinfo="skip",
            marker={"symbol": "square-open", "size": SELECTED_SIZE, "color": "#1f77b4", "line": {"width": 3}}))
    if folds:
        hidden = sum(f.hidden for f in folds)
        title = (f"{title or ''}<br><sup>drawn: {len(shown) - 1} of {tree.size} nodes; {hidden} folded into "
                 f"{len(folds)} '+N more' nodes (click one to open it)</sup>")
    rows = 1 + max(-y for _, y in pos.values())
    ticks = list(range(depth_shown + 1)) + ([depth_shown + 1] if exit_node is not None and bonus_text else [])
    fig.update_layout(
        title=title, height=int(min(2400, max(400, ROW_PX * rows + 200))),
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
        xaxis={"tickvals": ticks, "ticktext": [f"depth {d}" for d in range(depth_shown + 1)]
               + (["bonus"] if len(ticks) > depth_shown + 1 else []),
               "range": [-0.3, depth_shown + 1.9], "zeroline": False, "side": "top", "showgrid": False},
        yaxis={"visible": False, "range": [-rows + 0.4, 0.6]},
        legend={"orientation": "h", "y": -0.01, "yanchor": "top"},
        hovermode="closest", clickmode="event+select", dragmode="pan")
    return fig


def record_tree_figure(record, selected: int | None = None, title: str | None = None, fan: int | None = None,
                       opened: Sequence[int] = ()) -> go.Figure:
    """The tree figure of one recorded round (with `fan`, big sibling fans folded; see `tree_figure`)."""
    if title is None:
        title = (f"round {record.index}: {record.tree.size} nodes, 1 + C = {record.expected_length:.2f}, "
                 f"block length {record.emitted}")
    return tree_figure(record.tree, record.flow, record.token_texts, missing_texts=record.missing_texts,
                       path=record.path, exit_node=record.exit_node, bonus_text=record.bonus_text,
                       selected=selected, title=title, fan=fan, opened=opened)
