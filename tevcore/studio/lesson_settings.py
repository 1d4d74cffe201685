"""The lessons' settings: hand-written trees with the target's probabilities after each node, a target row beside a
drafter row, the toy target, and the one-node drawn tree; small enough to read in a table, built with the
engine's own tree, flow and sampled-builder functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tevcore.engine.draft_rows import as_draft_rows
from tevcore.engine.sampled import SampledShape, depth_rows, grow_sampled
from tevcore.engine.tree import DraftTree

from tevcore.studio.compact import OTHER  # the column of every token a setting does not name

@dataclass(frozen=True)
class HandTree:
    """A small tree written by hand: its nodes, the target's row after each node, and how to name them.

    Token 0 is the context's last token, which is the root: the root is named by it and says so.
    """

    tree: DraftTree
    node_logits: torch.Tensor  # (N+1, V) float64: log of the written probabilities, the rest on '(other)'
    vocab: tuple[str, ...]
    context: str

    @property
    def texts(self) -> list[str]:
        """Each node's token text (the root's is the context's last token)."""
        return [self.vocab[int(t)] for t in self.tree.tokens.tolist()]

    @property
    def labels(self) -> list[str]:
        """"0 ' saw' (root: the context's last token)", "1 ' a'", ...: what a question's choices and a chart call
        the nodes."""
        return [root_label(self.vocab[int(self.tree.tokens[0])]) if v == 0 else f"{v} {self.vocab[int(t)]!r}"
                for v, t in enumerate(self.tree.tokens.tolist())]

    def probs(self) -> torch.Tensor:
        return self.node_logits.exp()

    def rows(self) -> list[dict]:
        """The setting as a table: one row per token the target wants after a node (in the tree or not)."""
        probs, rows = self.probs(), []
        children = {(int(self.tree.parents[v]), int(self.tree.tokens[v])): v for v in range(1, self.tree.num_nodes)}
        labels = self.labels
        for node in range(self.tree.num_nodes):
            for token in torch.nonzero(probs[node] > 0).flatten().tolist():
                child = children.get((node, token))
                rows.append({"after node": labels[node], "token": self.vocab[token],
                             "p(token | node)": round(float(probs[node, token]), 6),
                             "in the tree": f"node {child}" if child is not None else "no"})
        return rows


def root_label(token: str) -> str:
    return f"0 {token!r} (root: the context's last token)"


def hand_tree(context: str, nodes: Sequence[tuple[int, str, float]], missing: dict[int, Sequence[tuple[str, float]]],
              q: Sequence[float] | None = None) -> HandTree:
    """Nodes 1..N as (parent, token, p(token | parent)) in order (parents first); `missing` the tokens the target
    wants after a node that the tree does not hold; what a node's row leaves of 1 goes to '(other)'. `q`, where
    given, is the drafter's probability of each node's token (the tree's draft scores)."""
    root = context.split(" ")[-1]
    root = " " + root if " " in context else root
    words = [root] + sorted({t for _, t, _ in nodes} | {t for row in missing.values() for t, _ in row}) + [OTHER]
    vid = {w: i for i, w in enumerate(words)}
    probs = torch.zeros(len(nodes) + 1, len(words), dtype=torch.float64)
    for parent, token, p in nodes:
        probs[parent, vid[token]] = p
    for node, row in missing.items():
        for token, p in row:
            probs[node, vid[token]] = p
    probs[:, -1] = (1.0 - probs.sum(-1)).clamp_min(0.0)
    draft = [0.0] + [math.log(x) for x in q] if q is not None else [0.0] * (len(nodes) + 1)
    tree = DraftTree(tokens=torch.tensor([0] + [vid[t] for _, t, _ in nodes]),
                     parents=torch.tensor([-1] + [p for p, _, _ in nodes]), draft_logp=torch.tensor(draft))
    return HandTree(tree, probs.log(), tuple(words), context)


TOY_WORDS = (" time", " the", " cat", " sat", " on", " a", " mat")  # the toy target's vocabulary; 0 is the root


def toy_logits(prefix: Sequence[int], seed: int = 7) -> torch.Tensor:
    """The toy target's logits after the context plus `prefix` (token ids): a seeded random row per prefix, the
    same row whenever the same prefix is asked for (as a real model's row is a function of its prefix)."""
    key = seed
    for token in prefix:
        key = (key * 1_000_003 + int(token) + 1) % (2**31 - 1)
    generator = torch.Generator().manual_seed(key)
    return 2.5 * torch.randn(len(TOY_WORDS), generator=generator, dtype=torch.float64)


def toy_greedy(steps: int, seed: int = 7) -> list[int]:
    """Autoregressive greedy decoding of the toy target: `steps` argmax tokens, one after another."""
    out: list[int] = []
    for _ in range(steps):
        out.append(int(toy_logits(out, seed).argmax()))
    return out


@dataclass(frozen=True)
class Rows:
    """A target row p and a drafter row q after one context (index 0 the root token, p = q = 0 there)."""

    vocab: tuple[str, ...]
    p: torch.Tensor
    q: torch.Tensor

    def rows(self) -> list[dict]:
        return [{"token": w, "p (target)": float(self.p[i]), "q (drafter)": float(self.q[i])}
                for i, w in enumerate(self.vocab) if i > 0]

    @property
    def node_logits(self) -> torch.Tensor:
        """The rows of the root and of a one-node tree (the node's row only feeds the bonus after it)."""
        return self.p.log().expand(2, -1).clone()


def rows_after(context: str, words: Sequence[str], p: Sequence[float], q: Sequence[float]) -> Rows:
    root = " " + context.split(" ")[-1]
    return Rows((root, *words), torch.tensor([0.0, *p], dtype=torch.float64),
                torch.tensor([0.0, *q], dtype=torch.float64))


ONE_DRAW = SampledShape("iid", (1,))


def drawn_tree(rows: Rows, token: int) -> DraftTree:
    """The one-node tree the sampled builder makes when its one draw from q is `token`."""
    draft = depth_rows(as_draft_rows(rows.q.log().float().unsqueeze(0)), ONE_DRAW)
    return grow_sampled(0, draft, ONE_DRAW, None, 1.0, lambda row, k, replace: [token])
