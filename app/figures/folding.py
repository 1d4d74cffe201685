"""Which nodes a big tree figure draws: each sibling fan shows its likeliest children, the rest fold into one node.

At budgets of 16 and more a best-first tree has fans of dozens of siblings of tiny P(v); drawn one by one
they are unreadable on a projector. A fan keeps its `fan` children of largest P (and every node the round
marks: the accepted path, the exit, the chosen node, with their ancestors); the rest of it, when that is two
or more nodes, becomes one "+N more (sum P = ...)" node, and a folded child's subtree folds with it. A parent
in `opened` keeps its whole fan (the page opens one on a click).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

FOLD_PREFIX = "more:"  # a folded fan's customdata in the tree figure ("more:<parent>"): what a click reports


@dataclass(frozen=True)
class Fold:
    """One folded fan: the parent, its folded children and what they carry."""

    parent: int
    children: tuple[int, ...]  # the folded siblings (their subtrees are hidden with them)
    hidden: int  # nodes hidden in all: the folded siblings and their descendants
    mass: float  # sum of P over the folded siblings (their subtrees' mass is inside it)

    @property
    def label(self) -> str:
        mass = f"{self.mass:.3f}" if self.mass >= 0.001 else f"{self.mass:.1e}"  # never a bare 0.000
        return f"+{len(self.children)} more (sum P = {mass})"


def fold_fans(tree, flow, fan: int | None, marked: Iterable[int] = (),
              opened: Iterable[int] = ()) -> tuple[list[int], list[Fold]]:
    """(the nodes drawn, in node order; the folds). `fan` None draws every node."""
    n = tree.num_nodes
    if fan is None:
        return list(range(n)), []
    parents = tree.parents.tolist()
    P = flow.path_prob.tolist()
    keep = set()
    for v in marked:
        v = int(v)
        while 0 <= v < n and v not in keep:
            keep.add(v)
            v = parents[v] if v > 0 else -1
    opened = {int(v) for v in opened}
    children = tree.children()
    subtree = [1] * n
    for v in range(n - 1, 0, -1):  # children have larger ids than their parents
        subtree[parents[v]] += subtree[v]
    shown, folds, stack = [], [], [0]
    while stack:
        v = stack.pop()
        shown.append(v)
        kids = sorted(children[v], key=lambda k: (-P[k], k))
        if v in opened:
            visible, folded = kids, []
        else:
            visible = [k for rank, k in enumerate(kids) if rank < max(fan, 1) or k in keep]
            folded = [k for k in kids if k not in set(visible)]
            if len(folded) == 1:  # "+1 more" saves nothing: draw it
                visible, folded = kids, []
        if folded:
            folds.append(Fold(v, tuple(sorted(folded)), sum(subtree[k] for k in folded), sum(P[k] for k in folded)))
        stack.extend(visible)
    return sorted(shown), sorted(folds, key=lambda f: f.parent)
