"""Plain-data helpers of the app (no streamlit): example records, replay rows, workshop trees.

Every flow quantity is computed by `tevcore.engine.flow.target_flow`; this module
only shapes inputs for it (trees, node logits) and reads its outputs.
"""

from __future__ import annotations

import io
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pandas as pd
import torch

from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, StageTimings, Trace, read_trace, write_trace
from tevcore.engine.tree import DraftTree

OTHER = "(other)"
ROOT = "<root>"


# ---------------------------------------------------------------- example records (no model)

def synthetic_record(budget: int = 16, seed: int = 0, vocab: int = 40, depth: int = 6, temperature: float = 1.0,
                     index: int = 0) -> tuple[RoundRecord, torch.Tensor]:
    """A made-up round on a random toy target: the tree, its flow and node logits.

    The tree comes from the engine's best-first builder on random draft rows;
    the "verdict" follows the path to the node of largest exit mass and takes
    that node's top missing token as bonus (a stand-in: no verifier runs here).
    """
    gen = torch.Generator().manual_seed(seed)
    depth_logq = torch.log_softmax(3.0 * torch.randn(depth, vocab, generator=gen), -1)
    tree = best_first(0, depth_logq, budget)
    logits = 3.0 * torch.randn(tree.num_nodes, vocab, generator=gen)
    # make the target like the tree a little, so flows look like real ones
    logits[tree.parents[1:], tree.tokens[1:]] += 2.5
    flow = target_flow(tree, logits, temperature)
    exit_node = int(flow.exit_mass.argmax())
    path = tree.path(exit_node)
    bonus = int(flow.missing_tokens[exit_node, 0])
    texts = [f"t{int(t)}" for t in tree.tokens.tolist()]
    missing = [[f"t{int(t)}" for t in row] for row in flow.missing_tokens.tolist()]
    emitted = tree.tokens[path[1:]].tolist() + [bonus]
    record = RoundRecord(
        index=index, proposer="synthetic", builder="best_first", budget=budget, temperature=temperature,
        context_length=10, tree=tree, flow=flow, token_texts=texts, missing_texts=missing, verifier="synthetic",
        path=path, exit_node=exit_node, bonus_token=bonus, bonus_text=f"t{bonus}", emitted_tokens=emitted,
        emitted_text="".join(f" t{t}" for t in emitted),
        timings=StageTimings(draft=0.004, tree_build=0.001, tree_forward=0.02, flow=0.001, verify_decision=0.0004,
                             commit=0.001))
    return record, logits


def synthetic_records(rounds: int = 5, budget: int = 16, seed: int = 0) -> list[RoundRecord]:
    return [synthetic_record(budget=budget, seed=seed + i, index=i)[0] for i in range(rounds)]


# ---------------------------------------------------------------- trace files in memory

def trace_bytes(records: list[RoundRecord], meta: dict | None = None) -> bytes:
    """A trace file's bytes (plain JSONL), written by the engine's writer."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "trace.jsonl", records, meta or {})
        return path.read_bytes()


def trace_from_bytes(data: bytes, name: str = "trace.jsonl") -> Trace:
    """Read an uploaded trace file (.jsonl or .jsonl.gz); ValueError when corrupt."""
    suffix = ".jsonl.gz" if name.endswith(".gz") else ".jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        return read_trace(path)


def load_trace(source: bytes | str | Path, name: str = "trace.jsonl") -> Trace:
    """A trace to replay, from uploaded bytes (named `name`) or a file; ValueError when corrupt or empty."""
    trace = trace_from_bytes(source, name) if isinstance(source, bytes) else read_trace(source)
    if not trace.rounds:
        raise ValueError("the trace holds no rounds")
    return trace


# ---------------------------------------------------------------- approximate rows of a replayed round

@dataclass
class CompactRound:
    """A round re-expressed on a small vocabulary, ready for `simulate` / `exit_law`."""

    tree: DraftTree
    node_logits: torch.Tensor  # (N+1) x V' log-probabilities (temperature already applied: use T = 1)
    vocab_texts: list[str]  # text of each compact token id
    approximate: bool


def approximate_round(record: RoundRecord) -> CompactRound:
    """Rows p(.|v) rebuilt from a stored round: children probabilities, top missing tokens, one 'other' bucket.

    Traces keep no node logits, so this is APPROXIMATE: the missing tail beyond
    the recorded top tokens is pooled into one '(other)' token. The exit law
    (X) and 1 + C are unchanged by the pooling; bonus laws are pooled.
    """
    tree, flow = record.tree, record.flow
    ids: dict[int, int] = {}
    texts: list[str] = []

    def compact(token: int, text: str) -> int:
        if token not in ids:
            ids[token] = len(texts)
            texts.append(text)
        return ids[token]

    new_tokens = [compact(int(t), record.token_texts[i]) for i, t in enumerate(tree.tokens.tolist())]
    n = tree.num_nodes
    entries: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for child in range(1, n):
        entries[int(tree.parents[child])].append((new_tokens[child], float(flow.edge_prob[child])))
    for v in range(n):
        row_texts = record.missing_texts[v] if v < len(record.missing_texts) else []
        for i, (tok, p) in enumerate(zip(flow.missing_tokens[v].tolist(), flow.missing_probs[v].tolist())):
            if p > 0:
                entries[v].append((compact(int(tok), row_texts[i] if i < len(row_texts) else str(tok)), float(p)))
    other = len(texts)
    texts.append(OTHER)
    probs = torch.zeros(n, len(texts), dtype=torch.float64)
    for v in range(n):
        for tok, p in entries[v]:
            probs[v, tok] += p
        probs[v, other] = max(0.0, 1.0 - float(probs[v].sum()))
    probs = probs / probs.sum(-1, keepdim=True)
    compact_tree = DraftTree(tokens=torch.tensor(new_tokens), parents=tree.parents.clone(),
                             draft_logp=tree.draft_logp.clone())
    return CompactRound(compact_tree, probs.log(), texts, approximate=True)


def exact_round(record: RoundRecord, node_logits: torch.Tensor, decode) -> CompactRound:
    """A live round with its true node logits (full vocabulary); `decode` maps token ids to text."""
    return CompactRound(record.tree, node_logits, _LazyTexts(decode), approximate=False)


class _LazyTexts:
    """Token id -> text, decoded on demand (a full vocabulary is too large to list)."""

    def __init__(self, decode) -> None:
        self.decode = decode

    def __getitem__(self, token: int) -> str:
        return self.decode(int(token))


# ---------------------------------------------------------------- workshop trees

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


# ---------------------------------------------------------------- benchmark results

BENCH_COLUMNS = ("verifier", "budget", "speedup", "mean_block_length")


def bench_rows(data: bytes | str) -> pd.DataFrame:
    """Rows of an end-to-end result file: a JSON list of rows, or an object with a 'rows'/'results' list."""
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"not a JSON file: {err}") from None
    if isinstance(obj, dict):
        for key in ("rows", "results", "runs"):
            if isinstance(obj.get(key), list):
                obj = obj[key]
                break
    if not isinstance(obj, list) or not obj or not all(isinstance(r, dict) for r in obj):
        raise ValueError("expected a list of result rows (objects with verifier, budget, speedup, mean_block_length)")
    frame = pd.DataFrame(obj)
    need = [c for c in ("verifier", "budget") if c not in frame]
    if need:
        raise ValueError(f"result rows lack the field(s) {', '.join(need)}")
    if "speedup" not in frame and "mean_block_length" not in frame:
        raise ValueError("result rows need 'speedup' or 'mean_block_length'")
    return frame


def read_jsonl_frame(text: str) -> pd.DataFrame:
    """A JSONL log as a frame; unreadable lines (a line being written) are skipped."""
    rows = []
    for line in io.StringIO(text):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return pd.DataFrame(rows)
