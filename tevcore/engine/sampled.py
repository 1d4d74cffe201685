"""Sampled builders: each node's children drawn from the drafter's proposal q (the other school of trees).

`sampled:K1,K2,...` gives the root K1 draws, each depth-1 node K2 draws, and
so on, i.i.d. from the node's q (equal draws share one child node);
`sampled-wor:K1,...` draws without replacement. A mixed tree
(`mixed:K1,...`, `mixed-wor:K1,...`) keeps each node's top-1 token of q as a
FIXED child (a point-mass draw, recorded as such) and draws the other K_d - 1
children from q with that token removed, renormalised (i.i.d. or without
replacement): the drafter's best guess is always tried, its siblings are
coupled with the target by recursive rejection. q is the node's draft row at
the round's temperature, or at a proposal temperature of the shape's own (the
same `sampling.probs` the target's rows go through; a lookup mixture is
already in the rows). A policy shape (`sharp`) decides per node, from the
draft row alone, between all-fixed children (a sharp row) and a mixed node. Nodes are expanded
breadth-first and a node draws at most as many times as the budget still has
room for, a count fixed before its draws, so the draws stay exactly q's
law and the tree never exceeds the budget. The draws and the proposal rows go
into the tree's `DrawRecord` for the proposal-ratio verifiers.

`grow_sampled` takes two functions as arguments. `level_rows` gives the q
rows of one depth's nodes in one call: a drafter's per-depth rows are shared
by a whole depth (`depth_rows`), while a draft LM runs one batched forward
over the depth's nodes, each on its own path. `draw` makes the draws:
decoding passes the round's generator (`sampling.draw_proposals`), and the
exactness tests pass one that enumerates every draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.draft_rows import DraftRows
from tevcore.engine.draws import DrawRecord
from tevcore.engine.sampling import probs
from tevcore.engine.tree import DraftTree, path_of


# draw(q, k, replace) -> k drawn token ids from the (V,) probability row q
DrawFn = Callable[[torch.Tensor, int, bool], list[int]]
# level_rows(nodes, tokens, parents) -> (R x V draft log-probs, the index of each node's row among the R): the
# rows the nodes of one depth draw their children from, given the tree so far (token and parent of every node;
# read, never changed)
LevelRows = Callable[[list[int], list[int], list[int]], tuple[torch.Tensor, list[int]]]


@dataclass(frozen=True)
class SampledShape:
    """Draw mode ('iid' or 'wor'), the number of children per node at each depth, and whether the top-1 of
    them is fixed (a mixed tree: one fixed child and K_d - 1 draws).

    `proposal_temperature`: the temperature of the q the children are drawn
    from (None: the round's). The target's temperature is untouched; rrs
    divides by the q the record keeps, whatever its temperature, so the
    verdict stays exact. `sharp` makes the shape a per-node policy: a node
    whose draft row at the round's temperature gives its top-1 at least
    `sharp` keeps its top K_d tokens of q all fixed; the others are mixed
    nodes (at T = 0 the policy's tree is the best-first tree, `policy_tree`).
    `path_rows`: a node off the drafter's own top-1 path draws from rows of a
    pass given its path (`path_conditioned_rows`), so a drawn sibling's
    subtree is drafted for that sibling.
    """

    mode: str
    widths: tuple[int, ...]
    fixed_top1: bool = False
    proposal_temperature: float | None = None
    sharp: float | None = None
    path_rows: bool = False


def node_draws(q: torch.Tensor, count: int, shape: SampledShape, draw: DrawFn,
               all_fixed: bool = False) -> list[tuple[int, bool]]:
    """One node's `count` children as (token, fixed), in draw order.

    A plain sampled node draws them all from q. A mixed node fixes q's
    top-1 (first index on ties) and draws `count - 1` from q without it,
    renormalised; where q holds nothing else (a point mass, as at T = 0)
    there is nothing left to draw and the node keeps its fixed child alone.
    An `all_fixed` node (a sharp node of a policy) keeps q's top `count`
    tokens of positive q, in q's order, every one fixed.
    """
    if all_fixed:
        top = torch.topk(q, min(count, int((q > 0).sum()))).indices.tolist()
        return [(int(token), True) for token in top]
    if not shape.fixed_top1:
        return [(int(token), False) for token in draw(q, count, shape.mode == "iid")]
    top = int(q.argmax())
    rest = q.clone()
    rest[top] = 0.0
    mass = float(rest.sum())
    drawn = draw(rest / mass, count - 1, shape.mode == "iid") if count > 1 and mass > 0 else []
    return [(top, True)] + [(int(token), False) for token in drawn]


def check_levels(shape: SampledShape, depth: int) -> None:
    """Refuse a shape with more draw depths than the drafter gives."""
    if len(shape.widths) > depth:
        raise ValueError(f"{len(shape.widths)} draw depths but the drafter only gives {depth} depths")


def depth_rows(rows: DraftRows, shape: SampledShape) -> LevelRows:
    """`level_rows` of per-depth rows: a depth's nodes share its row, or the row below their depth-1 token (or,
    for a shape with `path_rows`, the row of a pass given their own path)."""
    check_levels(shape, rows.depth)
    if shape.path_rows:
        return path_conditioned_rows(rows)

    def level(nodes: list[int], tokens: list[int], parents: list[int]) -> tuple[torch.Tensor, list[int]]:
        keys: dict[int | None, int] = {}
        index = []
        for node in nodes:
            path = path_of(parents, node)
            first = tokens[path[1]] if len(path) > 1 else None
            index.append(keys.setdefault(first if first in rows.after_first else None, len(keys)))
        depth = len(path_of(parents, nodes[0]))  # the depth the nodes' children will have
        return torch.stack([rows.row(depth, first) for first in keys]), index

    return level


def path_conditioned_rows(rows: DraftRows) -> LevelRows:
    """`level_rows` where each node draws from the pass that drafted its own path.

    A pass given a path (the plain pass is given the empty one) drafts the
    depths below it; a node whose path goes on from a pass's path along that
    pass's top-1 tokens takes its row from that pass (the longest such path
    wins), so the drafter's own top-1 spine keeps the plain rows. Any other
    node (one below a drawn sibling, at any depth) gets a pass given its
    whole path, one batched call per depth for all such nodes; a path longer
    than the drafter can be given takes the rows of its longest prefix that
    it can. Every pass is kept for the tree's later depths.
    """
    if rows.below_path is None:
        raise ValueError("rows conditioned on each sibling's path need a block drafter trained with known slots "
                         "(train --known-prob P --known-depth D)")
    passes: dict[tuple[int, ...], torch.Tensor] = {(): rows.shared, **{(t,): r for t, r in rows.after_first.items()}}
    tops: dict[tuple[int, ...], list[int]] = {}

    def follows(path: tuple[int, ...], start: int) -> bool:
        """Whether `path` goes on from its first `start` tokens along the top-1 tokens of their pass."""
        if path[:start] not in passes:
            return False
        top = tops.setdefault(path[:start], passes[path[:start]].argmax(dim=-1).tolist())
        return all(path[i] == top[i - start] for i in range(start, len(path)))

    def origin(path: tuple[int, ...]) -> tuple[int, ...] | None:
        start = next((j for j in range(len(path), -1, -1) if follows(path, j)), None)
        if start is not None:
            return path[:start]
        if len(path) <= rows.known_depth:
            return None  # a pass of its own
        return next(path[:j] for j in range(rows.known_depth, -1, -1) if path[:j] in passes)

    def level(nodes: list[int], tokens: list[int], parents: list[int]) -> tuple[torch.Tensor, list[int]]:
        paths = [tuple(tokens[v] for v in path_of(parents, node)[1:]) for node in nodes]
        depth = len(paths[0]) + 1  # the depth the nodes' children will have
        found = {path: origin(path) for path in dict.fromkeys(paths)}
        new = [path for path, at in found.items() if at is None]
        if new:
            passes.update(zip(new, rows.below_path(new)))
            found.update({path: path for path in new})
        keys: dict[tuple[int, ...], int] = {}
        index = [keys.setdefault(found[path], len(keys)) for path in paths]
        return torch.stack([passes[at][depth - 1 - len(at)] for at in keys]), index

    return level


def grow_sampled(root_token: int, level_rows: LevelRows, shape: SampledShape, budget: int | None,
                 temperature: float, draw: DrawFn) -> DraftTree:
    """The tree the draws make, breadth-first, with its `DrawRecord` of the very rows each node drew from.

    Breadth-first order means every node of a depth exists when the first of
    them draws, so `level_rows` is asked once per depth, for all of them that
    the budget leaves room to draw. A row enters the record (as
    probabilities at `temperature`) when a node draws from it.
    """
    tokens, parents, logq, depths = [root_token], [-1], [0.0], [0]
    proposal_temperature = shape.proposal_temperature
    if proposal_temperature is None:  # the round's; a policy's fixed children need q > 0, so 1 at T = 0
        proposal_temperature = 1.0 if shape.sharp is not None and temperature == 0 else temperature
    proposals: list[torch.Tensor] = []
    sharp_rows: list[bool] = []  # per kept row: a policy's sharp node (its children all fixed)
    row_of = [-1]
    drawn_at: list[int] = []
    drawn_child: list[int] = []
    drawn_q: list[float] = []
    fixed: list[bool] = []
    level: dict[int, int] = {}  # node of the depth being drawn -> its row among `raw`
    kept: dict[int, int] = {}  # row among `raw` -> its index in `proposals`
    room = math.inf if budget is None else int(budget)
    node = 0
    while node < len(tokens) and depths[node] < len(shape.widths) and len(tokens) - 1 < room:
        if node not in level:  # the first node of a new depth: every later node is of this depth
            # each node that draws adds at least one node, so only the first `room left` of them can draw
            nodes = list(range(node, int(min(len(tokens), node + room - (len(tokens) - 1)))))
            raw, index = level_rows(nodes, tokens, parents)
            level, kept = dict(zip(nodes, index)), {}
        if level[node] not in kept:
            kept[level[node]] = len(proposals)
            proposals.append(probs(raw[level[node]].detach().double().cpu(), proposal_temperature))
            sharp_rows.append(shape.sharp is not None and float(
                probs(raw[level[node]].detach().double().cpu(), temperature).max()) >= shape.sharp)
        row_of[node] = kept[level[node]]
        q = proposals[row_of[node]]
        depth = depths[node] + 1
        count = int(min(shape.widths[depth - 1], room - (len(tokens) - 1)))
        child_of: dict[int, int] = {}
        for token, is_fixed in node_draws(q, count, shape, draw, sharp_rows[row_of[node]]):
            if token not in child_of:
                child_of[token] = len(tokens)
                tokens.append(int(token))
                parents.append(node)
                logq.append(math.log(float(q[token])))
                depths.append(depth)
                row_of.append(-1)
            drawn_at.append(node)
            drawn_child.append(child_of[token])
            drawn_q.append(float(q[token]))
            fixed.append(is_fixed)
        node += 1
    stacked = torch.stack(proposals) if proposals else torch.zeros(0, 0, dtype=torch.float64)
    draws = DrawRecord(shape.mode, torch.tensor(drawn_at, dtype=torch.long),
                       torch.tensor(drawn_child, dtype=torch.long), torch.tensor(drawn_q, dtype=torch.float64),
                       rows=stacked, row_of=torch.tensor(row_of, dtype=torch.long),
                       fixed=torch.tensor(fixed, dtype=torch.bool) if shape.fixed_top1 or any(fixed) else None)
    return DraftTree(tokens=torch.tensor(tokens, dtype=torch.long), parents=torch.tensor(parents, dtype=torch.long),
                     draft_logp=torch.tensor(logq, dtype=torch.float32), budget=budget, draws=draws)


def all_fixed(tree: DraftTree, level_rows: LevelRows, temperature: float) -> DraftTree:
    """`tree` (a fixed tree: best-first's) recorded as a tree whose every child is fixed: each node with children
    keeps its draft row at `temperature` (> 0, so every fixed token has q > 0) and its children as point-mass
    draws, in q's order. rrs on it is the sequential residual rule, which reaches sum p over the children: what
    a policy shape builds at T = 0, where the greedy target makes drawing pointless."""
    if temperature <= 0:
        raise ValueError("an all-fixed record keeps its rows at a temperature above 0")
    tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
    children, depths = tree.children(), tree.depths.tolist()
    logq = [0.0] * tree.num_nodes
    proposals: list[torch.Tensor] = []
    row_of = [-1] * tree.num_nodes
    drawn_at: list[int] = []
    drawn_child: list[int] = []
    drawn_q: list[float] = []
    for depth in range(tree.max_depth):
        nodes = [v for v in range(tree.num_nodes) if depths[v] == depth and children[v]]
        if not nodes:
            continue
        raw, index = level_rows(nodes, tokens, parents)
        kept: dict[int, int] = {}
        for node, at in zip(nodes, index):
            if at not in kept:
                kept[at] = len(proposals)
                proposals.append(probs(raw[at].detach().double().cpu(), temperature))
            row_of[node] = kept[at]
            q = proposals[row_of[node]]
            for kid in sorted(children[node], key=lambda k: (-float(q[tokens[k]]), k)):
                drawn_at.append(node)
                drawn_child.append(kid)
                drawn_q.append(float(q[tokens[kid]]))
                logq[kid] = math.log(float(q[tokens[kid]]))
    stacked = torch.stack(proposals) if proposals else torch.zeros(0, 0, dtype=torch.float64)
    draws = DrawRecord("iid", torch.tensor(drawn_at, dtype=torch.long), torch.tensor(drawn_child, dtype=torch.long),
                       torch.tensor(drawn_q, dtype=torch.float64), rows=stacked,
                       row_of=torch.tensor(row_of, dtype=torch.long),
                       fixed=torch.ones(len(drawn_at), dtype=torch.bool))
    return DraftTree(tokens=tree.tokens, parents=tree.parents, draft_logp=torch.tensor(logq, dtype=torch.float32),
                     budget=tree.budget, draws=draws)
