"""Sibling diagnostics: which (depth, sibling rank) nodes a verifier accepts, and what follows a non-top-1 pick.

A node's sibling rank is its place among its parent's children by the
drafter's log-probability (0 = the drafter's top-1; ties by node index), on
fixed and sampled trees alike. Two tables answer "does the tree's width pay":
per (depth, rank) the share of such nodes that ended on the accepted path,
and per depth how often the next depth was accepted after the accepted node
there was the top-1 sibling, against after it was another sibling (counted
only where the accepted node had children to go on to).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from tevcore.engine.records import RoundRecord
from tevcore.engine.tree import DraftTree
from tevcore.results import Column, format_table


def sibling_ranks(tree: DraftTree) -> list[int]:
    """Each node's rank among its siblings by draft log-probability (0 = the top-1, and 0 at the root)."""
    logp = tree.draft_logp.tolist()
    ranks = [0] * tree.num_nodes
    for kids in tree.children():
        for rank, kid in enumerate(sorted(kids, key=lambda k: (-logp[k], k))):
            ranks[kid] = rank
    return ranks


def sibling_diagnostics(records: Iterable[RoundRecord]) -> dict[str, list[dict]]:
    """{'by_rank': [{depth, rank, nodes, accepted, share}], 'after_pick': [{depth, pick, rounds, next_accepted, share}]}."""
    nodes: dict[tuple[int, int], int] = defaultdict(int)
    accepted: dict[tuple[int, int], int] = defaultdict(int)
    rounds: dict[tuple[int, str], int] = defaultdict(int)
    went_on: dict[tuple[int, str], int] = defaultdict(int)
    for record in records:
        if not record.path:
            continue
        tree = record.tree
        ranks = sibling_ranks(tree)
        depths, children = tree.depths.tolist(), tree.children()
        on_path = set(record.path)
        for node in range(1, tree.num_nodes):
            key = (depths[node], ranks[node])
            nodes[key] += 1
            accepted[key] += node in on_path
        for position, node in enumerate(record.path[1:], start=1):
            if children[node]:
                key = (depths[node], "top-1" if ranks[node] == 0 else "other")
                rounds[key] += 1
                went_on[key] += position + 1 < len(record.path)
    by_rank = [{"depth": d, "rank": r, "nodes": n, "accepted": accepted[(d, r)], "share": accepted[(d, r)] / n}
               for (d, r), n in sorted(nodes.items())]
    after_pick = [{"depth": d, "pick": pick, "rounds": n, "next_accepted": went_on[(d, pick)],
                   "share": went_on[(d, pick)] / n} for (d, pick), n in sorted(rounds.items())]
    return {"by_rank": by_rank, "after_pick": after_pick}


def format_sibling_table(label: str, diagnostics: dict[str, list[dict]], max_rank: int = 4) -> str:
    """Accepted share per (depth, rank) (ranks past `max_rank` pooled in the last column) and the after-pick shares."""
    cells: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for row in diagnostics["by_rank"]:
        cell = cells[(row["depth"], min(row["rank"], max_rank))]
        cell[0] += row["accepted"]
        cell[1] += row["nodes"]
    picks = {(row["depth"], row["pick"]): row for row in diagnostics["after_pick"]}

    def share(got: int, total: int) -> str | None:
        return f"{got / total:.3f} ({total})" if total else None

    rows = [{"depth": d, **{r: share(*cells.get((d, r), (0, 0))) for r in range(max_rank + 1)},
             **{p: share(picks[(d, p)]["next_accepted"], picks[(d, p)]["rounds"]) if (d, p) in picks else None
                for p in ("top-1", "other")}}
            for d in sorted({d for d, _ in cells})]
    columns = [Column("depth", "depth", "d")] + [
        Column(f"r{r}" if r < max_rank else f"r{max_rank}+", lambda row, r=r: row[r], "s") for r in range(max_rank + 1)
    ] + [Column("after top-1", "top-1", "s"), Column("after other", "other", "s")]
    return (f"{label}: accepted share by (depth, sibling rank); next depth accepted after a top-1 / other pick\n"
            + format_table(rows, columns))
