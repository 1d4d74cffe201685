"""A stored or live round re-expressed on a small vocabulary, ready for `simulate` / `exit_law`: what the verifier
comparison runs its rules on when its source is an explorer round (exact rows of a live round, or rows rebuilt
approximately from a replayed one)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tevcore.engine.records import RoundRecord
from tevcore.engine.tree import DraftTree

OTHER = "(other)"  # the pooled token of everything a round did not record


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
    return CompactRound(record.tree, node_logits, LazyTexts(decode), approximate=False)


class LazyTexts:
    """Token id -> text, decoded on demand (a full vocabulary is too large to list)."""

    def __init__(self, decode) -> None:
        self.decode = decode

    def __getitem__(self, token: int) -> str:
        return self.decode(int(token))
