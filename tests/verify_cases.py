"""Scored trees of four shapes over a 40-token vocabulary, for the statistical tests of the verify rules.

chain: one path; bushy: 6 x 3 children; deep: a peaked best-first tree going
down a long chain with a branch now and then; faint: branches the target
almost never takes (path probabilities below 1e-4).
"""

from __future__ import annotations

import zlib

import torch

from tevcore.engine.builders import best_first, chain, fixed_width
from tevcore.engine.tree import DraftTree

VOCAB = 40
KINDS = ("chain", "bushy", "deep", "faint")


def seeded(*key: object) -> torch.Generator:
    """A generator seeded by a hash of `key`."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def case_tree(kind: str) -> DraftTree:
    noise = torch.randn(10, VOCAB, generator=seeded("tree", kind))
    if kind == "chain":
        return chain(3, torch.log_softmax(noise[:6], -1))
    if kind == "bushy":
        return fixed_width(3, torch.log_softmax(noise, -1), [6, 3])
    if kind == "deep":
        return best_first(3, torch.log_softmax(6.0 * noise, -1), 24)
    return best_first(3, torch.log_softmax(2.5 * noise, -1), 20)


def case_logits(tree: DraftTree, kind: str) -> torch.Tensor:
    """Target logits that take the tree's branches often (first child most), or almost never ("faint")."""
    logits = 1.5 * torch.randn(tree.num_nodes, VOCAB, generator=seeded("target", kind))
    for node, kids in enumerate(tree.children()):
        for rank, kid in enumerate(kids):
            logits[node, tree.tokens[kid]] += 3.0 - rank if kind != "faint" or rank == 0 else -12.0
    return logits


RULE_CASES = {kind: (case_tree(kind), case_logits(case_tree(kind), kind)) for kind in KINDS}
