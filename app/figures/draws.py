"""How a sampled round's tree was drawn, and the trail of rrs or block verification on it, as tables and hover text.

Everything is read from the tree's `DrawRecord` (which node drew which child,
in what order, with what q) and from an `RrsTrail` or `BlockTrail` the engine
built; nothing here computes a probability.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from figures.common import plural, short
from tevcore.studio.trails import BlockTrail


def _text(texts: Sequence[str], tree, node: int) -> str:
    return texts[node] if node < len(texts) else str(int(tree.tokens[node]))


def draws_table(record) -> pd.DataFrame:
    """One row per draw of a sampled or mixed round, in draw order (empty for a fixed tree); `kind` tells a mixed
    tree's fixed child (q's top-1, a point-mass draw) from the children drawn from q."""
    tree, draws = record.tree, record.tree.draws
    columns = ["draw", "at node", "draw at node", "kind", "child", "token", "depth", "q", "accepted child"]
    if draws is None:
        return pd.DataFrame(columns=columns)
    on_path = set(record.path or [])
    order_at: dict[int, int] = {}
    rows = []
    for i, (parent, child, q, fixed) in enumerate(zip(draws.parents.tolist(), draws.children.tolist(),
                                                       draws.q.tolist(), draws.fixed.tolist())):
        order_at[parent] = order_at.get(parent, -1) + 1
        rows.append({"draw": i, "at node": parent, "draw at node": order_at[parent], "kind": _kind(fixed),
                     "child": child, "token": _text(record.token_texts, tree, child),
                     "depth": int(tree.depths[child]), "q": q, "accepted child": child in on_path})
    return pd.DataFrame(rows, columns=columns)


def _kind(fixed: bool) -> str:
    return "fixed (top-1 of q)" if fixed else "drawn from q"


def node_draws_text(tree, node: int) -> str:
    """How `node` came into a sampled tree and what it drew: plain text ('' for a fixed tree)."""
    draws = tree.draws
    if draws is None:
        return ""
    parts = []
    if node > 0:
        parent = int(tree.parents[node])
        siblings, q = draws.at(parent)
        orders = [str(i + 1) for i, child in enumerate(siblings) if child == node]
        if draws.fixed_at(parent)[siblings.index(node)]:
            parts.append(f"fixed at node {parent}: its top-1 child of q (q = {q[siblings.index(node)]:.4f}), not "
                         f"drawn; rrs tries it after the drawn siblings")
        else:
            parts.append(f"drawn at node {parent} as draw {', '.join(orders)} of {len(siblings)} "
                         f"(q = {q[siblings.index(node)]:.4f}, {draws.mode}"
                         f"{', from q without the fixed child' if draws.mixed else ''})")
    made, _ = draws.at(node)
    if made:
        distinct = len(set(made))
        parts.append(f"drew {plural(len(made), 'time')} ({plural(distinct, 'distinct child', 'distinct children')})")
    return "; ".join(parts)


def trail_table(trail, tree, texts: Sequence[str], bonus_text: str | None = None) -> pd.DataFrame:
    """The tries of an rrs trail in order (or a block trail's chain nodes), then the exit and bonus as the last row."""
    if isinstance(trail, BlockTrail):
        return block_trail_table(trail, tree, texts, bonus_text)
    rows = [{"step": i, "at node": s.node, "draw at node": s.draw, "kind": _kind(s.fixed), "child": s.child,
             "token": _text(texts, tree, s.child), "q": s.q, "divided by": _proposal_words(s, tree),
             "proposal of its token": s.proposal, "acceptance probability": s.accept_prob,
             "outcome": "accepted" if s.accepted else "rejected"} for i, s in enumerate(trail.steps)]
    bonus = f"bonus token id {trail.bonus_token}" if bonus_text is None else f"bonus {bonus_text!r}"
    rows.append({"step": len(rows), "at node": trail.exit_node, "draw at node": None, "kind": None, "child": None,
                 "token": bonus, "q": None, "divided by": None, "proposal of its token": None,
                 "acceptance probability": None,
                 "outcome": f"exit at node {trail.exit_node} ({short(_text(texts, tree, trail.exit_node), 16)}): "
                            "every try there rejected or none left; the bonus is drawn from the residual"})
    table = pd.DataFrame(rows)
    return table.astype({"draw at node": "Int64", "child": "Int64"})


def _proposal_words(step, tree) -> str:
    """The law a try was drawn from, the one its acceptance divides by, in words (the step keeps its value)."""
    if step.fixed:
        return "point mass on its token (1): the residual's mass there"
    draws = tree.draws
    without = [] if not draws.mixed else ["the fixed child"]
    if draws.mode == "wor" and step.draw > sum(draws.fixed_at(step.node)):
        without.append("the earlier draws")
    return "q" + (f" without {' and '.join(without)}, renormalised" if without else "")


def _coin(step) -> str:
    if step.outcome is None:
        return "not read: accepted with the block"
    return "success: the last one, so the exit" if step.outcome else "failed"


def block_trail_table(trail: BlockTrail, tree, texts: Sequence[str], bonus_text: str | None = None) -> pd.DataFrame:
    """A block trail: per chain node its token's q and p/q, the weight w carried to it, its stop probability h and
    its coin (read from the chain's end down to the exit), then the exit and bonus as the last row."""
    rows = [{"chain node": s.node, "token": _text(texts, tree, s.node), "q": s.q, "p/q": s.ratio, "weight w": s.weight,
             "stop probability h": s.stop_prob, "coin": _coin(s)} for s in trail.steps]
    bonus = f"bonus token id {trail.bonus_token}" if bonus_text is None else f"bonus {bonus_text!r}"
    where = "the root: every coin failed" if trail.exit_node == 0 else f"node {trail.exit_node}"
    rows.append({"chain node": trail.exit_node, "token": bonus, "q": None, "p/q": None, "weight w": None,
                 "stop probability h": None, "coin": f"exit at {where}; the bonus is drawn from the block residual"})
    return pd.DataFrame(rows)
