"""The workshop's hand-editable tables: the tree presets and the mixed node's p and q, each edited table checked
and turned into a tree with its target rows, and the mixed node tried in both orders (no streamlit)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import pandas as pd
import torch

from tevcore.engine.draft_rows import as_draft_rows
from tevcore.engine.flow import target_flow
from tevcore.engine.sampled import SampledShape, depth_rows, grow_sampled
from tevcore.engine.sampling import make_generator, uniform
from tevcore.engine.tree import DraftTree
from tevcore.lab.ceilings import optimal_acceptance
from tevcore.verify.laws import node_acceptance, rrs_fixed_first_law, rrs_law
from tevcore.verify.ratio_tables import RrsTables

from tevcore.studio.compact import OTHER

ROOT = "<root>"  # the root's label in a hand-made table


WORKSHOP_COLUMNS = ["node", "parent", "token", "p", "in tree"]


def workshop_presets() -> dict[str, pd.DataFrame]:
    """Hand-editable trees: one row per token the target wants after a parent node.

    Rows with `in tree` set are tree nodes (their `node` id is used as a parent by
    other rows; 0 is the root); the other rows are missing tokens. `p` is the
    target's p(token | parent); what a parent's rows leave of 1 goes to '(other)'.
    """
    def frame(rows):
        return pd.DataFrame(rows, columns=WORKSHOP_COLUMNS).astype(
            {"node": "Int64", "parent": "Int64", "token": "string", "p": "float64", "in tree": "bool"})

    chain = frame([
        (1, 0, "The", 0.8, True), (2, 1, " cat", 0.7, True), (3, 2, " sat", 0.6, True), (4, 3, " on", 0.5, True),
        (None, 0, "A", 0.15, False), (None, 1, " dog", 0.2, False), (None, 4, " the", 0.4, False)])
    bushy = frame([
        (1, 0, "The", 0.4, True), (2, 0, "A", 0.3, True), (3, 0, "In", 0.1, True),
        (4, 1, " cat", 0.5, True), (5, 1, " dog", 0.3, True), (6, 2, " big", 0.4, True), (7, 2, " small", 0.3, True),
        (8, 4, " sat", 0.6, True), (9, 5, " ran", 0.5, True), (None, 0, "One", 0.15, False),
        (None, 4, " is", 0.3, False), (None, 8, " on", 0.7, False)])
    root_loss = frame([
        (1, 0, "Yes", 0.1, True), (2, 0, "No", 0.05, True), (3, 1, ",", 0.95, True), (4, 3, " I", 0.9, True),
        (5, 4, " think", 0.9, True), (6, 2, ".", 0.8, True), (None, 0, "Well", 0.6, False),
        (None, 0, "Maybe", 0.2, False)])
    return {"chain": chain, "bushy": bushy, "loses most mass at the root": root_loss}


@dataclass
class WorkshopTree:
    tree: DraftTree
    node_logits: torch.Tensor  # log of the edited probabilities, remainder on '(other)'
    vocab: list[str]
    node_labels: list[str]  # "0 <root>", "1 'The'", ...
    node_ids: list[int]  # the user's node id of each tree index


def workshop_tree(table: pd.DataFrame) -> WorkshopTree:
    """Build a DraftTree and node logits from the edited table; ValueError with a plain message if invalid."""
    missing_cols = [c for c in WORKSHOP_COLUMNS if c not in table.columns]
    if missing_cols:
        raise ValueError(f"the table needs the columns {', '.join(missing_cols)}")
    rows = []
    for i, row in enumerate(table.to_dict("records"), start=1):
        token = row.get("token")
        if token is None or (isinstance(token, float) and math.isnan(token)) or pd.isna(token) or str(token) == "":
            if all(pd.isna(row.get(c)) for c in ("node", "parent", "p")):
                continue  # an empty row the editor added
            raise ValueError(f"row {i}: the token is empty")
        try:
            parent = int(row["parent"])
            p = float(row["p"])
        except (TypeError, ValueError):
            raise ValueError(f"row {i}: parent must be a node id and p a number") from None
        if math.isnan(p) or not 0.0 <= p <= 1.0:
            raise ValueError(f"row {i}: p must lie in [0, 1], got {row['p']}")
        in_tree = bool(row.get("in tree")) if not pd.isna(row.get("in tree")) else False
        node = row.get("node")
        if in_tree:
            if node is None or pd.isna(node):
                raise ValueError(f"row {i}: a tree node needs a node id")
            node = int(node)
            if node <= 0:
                raise ValueError(f"row {i}: node ids must be positive (0 is the root)")
        rows.append({"node": node if in_tree else None, "parent": parent, "token": str(token), "p": p,
                     "in_tree": in_tree, "row": i})
    tree_rows = [r for r in rows if r["in_tree"]]
    ids = [r["node"] for r in tree_rows]
    if len(set(ids)) != len(ids):
        raise ValueError("node ids must be unique")
    known = {0} | set(ids)
    for r in rows:
        if r["parent"] not in known:
            raise ValueError(f"row {r['row']}: parent {r['parent']} is not a tree node")
    graph = nx.DiGraph()
    graph.add_node(0)
    for r in tree_rows:
        graph.add_edge(r["parent"], r["node"])
    if not nx.is_directed_acyclic_graph(graph) or any(graph.in_degree(n) > 1 for n in graph.nodes):
        raise ValueError("the parent links form a cycle: every node needs one parent on a path to the root")
    order = [0] + [n for n in nx.topological_sort(graph) if n != 0]
    index = {node: i for i, node in enumerate(order)}
    by_parent: dict[int, list[dict]] = {}
    for r in rows:
        by_parent.setdefault(r["parent"], []).append(r)
    for parent, kids in by_parent.items():
        tokens = [k["token"] for k in kids]
        if len(set(tokens)) != len(tokens):
            raise ValueError(f"node {parent} lists a token twice: siblings and missing tokens must differ")
        total = sum(k["p"] for k in kids)
        if total > 1.0 + 1e-9:
            raise ValueError(f"the probabilities after node {parent} add up to {total:.3f} > 1")
    vocab = [ROOT] + sorted({r["token"] for r in rows}) + [OTHER]
    vid = {t: i for i, t in enumerate(vocab)}
    row_of = {r["node"]: r for r in tree_rows}
    tokens = [vid[ROOT]] + [vid[row_of[n]["token"]] for n in order[1:]]
    parents = [-1] + [index[row_of[n]["parent"]] for n in order[1:]]
    probs = torch.zeros(len(order), len(vocab), dtype=torch.float64)
    for r in rows:
        probs[index[r["parent"]], vid[r["token"]]] = r["p"]
    probs[:, vid[OTHER]] = (1.0 - probs.sum(-1)).clamp_min(0.0)
    tree = DraftTree(tokens=torch.tensor(tokens), parents=torch.tensor(parents),
                     draft_logp=torch.zeros(len(order)))
    labels = [f"{n} {'<root>' if n == 0 else repr(row_of[n]['token'])}" for n in order]
    return WorkshopTree(tree, probs.log(), vocab, labels, order)


def workshop_texts(ws: WorkshopTree) -> list[str]:
    return [ws.vocab[int(t)] for t in ws.tree.tokens.tolist()]


MIXED_PRESET = "mixed node: one fixed guess, one drawn sibling (both orders)"


def mixed_presets() -> dict[str, pd.DataFrame]:
    """p and q after one context (the coupling table's columns): the drafter's argmax is a decent guess and its
    second choice overlaps the target, so the order of the tries matters."""
    frame = pd.DataFrame({"token": [" cat", " dog", " bird", " fish", " cow"], "p": [0.35, 0.3, 0.15, 0.1, 0.1],
                          "q": [0.5, 0.1, 0.25, 0.1, 0.05]}, columns=["token", "p", "q"])
    return {MIXED_PRESET: frame.astype({"token": "string", "p": "float64", "q": "float64"})}


@dataclass(frozen=True)
class OrderTry:
    """One try at the root of the two-child mixed tree, as the engine's rrs tables give it."""

    token: str
    fixed: bool
    proposal: float  # the probability its proposal gave its token: what the acceptance divides by
    accept_prob: float  # min(1, r(token) / proposal), r the residual the earlier tries left
    uniform: float  # the shared random number of this try
    accepted: bool | None  # None: never reached (an earlier try was accepted)


@dataclass(frozen=True)
class TwoOrders:
    """The mixed node of `MIXED_PRESET` under both orders: over the sibling's draw, each order's acceptance (from
    the package's laws) beside the closed forms, and one drawn sibling tried under both with the same uniforms."""

    sibling: str  # the token drawn (with the seed) from q without the fixed guess
    guess: str
    siblings_first: float  # acceptance at the node over the draw, rrs (siblings first)
    fixed_first: float  # the same under the earlier order
    ceiling: float  # the design's ceiling there, p(a) + sum min(p, q') (`lab.ceilings`)
    tries: dict[str, list[OrderTry]]


def _mixed_tree(q: torch.Tensor, sibling: int) -> DraftTree:
    """The root's two children: q's argmax fixed, `sibling` drawn from q without it (the mixed builder's code)."""
    shape = SampledShape("iid", (2,), fixed_top1=True)
    rows = depth_rows(as_draft_rows(q.log().float().unsqueeze(0)), shape)
    return grow_sampled(0, rows, shape, None, 1.0, lambda row, k, replace: [sibling])


def two_orders(p: torch.Tensor, q: torch.Tensor, vocab: list[str], seed: int) -> TwoOrders:
    """Both orders on the mixed node of p and q (float64 rows over `vocab`), the sibling drawn with `seed`."""
    guess = int(q.argmax())
    rest = q.clone()
    rest[guess] = 0.0
    if float(rest.sum()) <= 0:
        raise ValueError("q puts all its mass on one token: there is no sibling to draw")
    rest /= rest.sum()
    logits = p.log().expand(3, -1).clone()
    laws = {"siblings first": rrs_law, "fixed first": rrs_fixed_first_law}
    over: dict[str, float] = dict.fromkeys(laws, 0.0)
    for token in torch.nonzero(rest > 0).flatten().tolist():
        tree = _mixed_tree(q, token)
        for name, law in laws.items():
            over[name] += float(rest[token]) * float(node_acceptance(law(tree, logits[:tree.num_nodes], 1.0))[0])
    generator = make_generator(seed)
    sibling = int(torch.multinomial(rest.float(), 1, generator=generator))
    tree = _mixed_tree(q, sibling)
    flow = target_flow(tree, logits[:tree.num_nodes], 1.0, missing_k=0)
    uniforms = uniform((2,), generator, torch.device("cpu")).tolist()
    tries: dict[str, list[OrderTry]] = {}
    for name, fixed_last in (("siblings first", True), ("fixed first", False)):
        tables = RrsTables(tree, logits[:tree.num_nodes], 1.0, flow.edge_prob, fixed_last=fixed_last)
        accept, done, found = tables.accept[0].tolist(), False, []
        for i, child in enumerate(tables.table[0].tolist()):
            outcome = None if done else uniforms[i] < accept[i]
            found.append(OrderTry(vocab[int(tree.tokens[child])], bool(tables.fixed[0, i]),
                                  tables.proposal_prob(0, i), accept[i], uniforms[i], outcome))
            done = done or bool(outcome)
        tries[name] = found
    ceiling, _ = optimal_acceptance(p, q, 1, "iid", fixed=[guess])
    return TwoOrders(vocab[sibling], vocab[guess], over["siblings first"], over["fixed first"], ceiling, tries)
