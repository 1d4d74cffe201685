"""`DraftTree`: the token tree one speculative round proposes.

Node 0 is the root (the last committed token); every other node carries a
draft token, its parent, its depth and the drafter's log-probability of that
token at that depth. A sampled tree also carries its `DrawRecord` (how each
node's children were drawn from the drafter's q), which the proposal-ratio
verifiers need. Validation happens on construction so that an invalid tree
never reaches the target or a verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tevcore.engine.draws import DrawRecord

MAX_TOKEN_ID = 2**31 - 1  # no vocabulary is larger; the target's own size is checked where the tree meets its logits

# What a tree guarantees beyond being a token tree: the facts a verification rule may need of it. A builder states
# the traits every tree it builds has (`BuilderSpec.traits`); a realised tree shows its own (`DraftTree.traits`).
DRAWN = "drawn"  # every child was drawn from a proposal the tree records (its `DrawRecord`)
DRAWN_CHAIN = "drawn chain"  # drawn from q, and no node drew more than once, nothing fixed: a sampled chain
TREE_TRAITS = {DRAWN: "drawn from the drafter's q with its draws recorded",
               DRAWN_CHAIN: "a chain drawn one draw per node"}


@dataclass(frozen=True)
class DraftTree:
    """A prefix-closed token tree; index 0 is the root, parents precede children."""

    tokens: torch.Tensor  # (N+1,) long; tokens[0] is the root token
    parents: torch.Tensor  # (N+1,) long; parents[0] == -1
    draft_logp: torch.Tensor  # (N+1,) float; draft log-prob of each node's token, 0 at root
    budget: int | None = None  # the node budget the tree was built under, if any
    draws: DrawRecord | None = None  # how a sampled tree was drawn; None for a fixed tree
    depths: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        tokens = _vector(self.tokens, "tokens", integer=True)
        parents = _vector(self.parents, "parents", integer=True)
        draft_logp = _vector(self.draft_logp, "draft_logp", integer=False)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "draft_logp", draft_logp)
        object.__setattr__(self, "depths", _validated_depths(tokens, parents, draft_logp, self.budget))
        if self.draws is not None:
            self.draws.check_tree(parents, draft_logp)

    @property
    def traits(self) -> frozenset[str]:
        """The `TREE_TRAITS` this tree has: a root-only tree has them all (nothing was drawn, nothing to divide)."""
        if self.size == 0:
            return frozenset(TREE_TRAITS)
        if self.draws is None:
            return frozenset()
        # a fixed (point-mass) child was chosen, not drawn from q: a mixed chain of fixed children is no drawn chain
        once = not bool(torch.bincount(self.draws.parents, minlength=self.num_nodes).gt(1).any())
        return frozenset({DRAWN, DRAWN_CHAIN} if once and not self.draws.mixed else {DRAWN})

    @property
    def sampled(self) -> bool:
        """Whether the children were drawn from the drafter's q (and the draws are recorded)."""
        return self.draws is not None

    @property
    def size(self) -> int:
        """Number of non-root nodes (what the budget counts)."""
        return int(self.tokens.numel()) - 1

    @property
    def num_nodes(self) -> int:
        """Number of nodes including the root."""
        return int(self.tokens.numel())

    @property
    def max_depth(self) -> int:
        return int(self.depths.max())

    def children(self) -> list[list[int]]:
        """Children of every node, in index order."""
        kids: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for child, parent in enumerate(self.parents.tolist()[1:], start=1):
            kids[parent].append(child)
        return kids

    def child_token_mask(self, vocab_size: int) -> torch.Tensor:
        """(N+1) x V boolean mask: True where the token is a child of that node."""
        mask = torch.zeros(self.num_nodes, vocab_size, dtype=torch.bool)
        mask[self.parents[1:], self.tokens[1:]] = True
        return mask

    def ancestor_mask(self) -> torch.Tensor:
        """(N+1) x (N+1) boolean mask: [i, j] is True when j is i or an ancestor of i."""
        n = self.num_nodes
        mask = torch.eye(n, dtype=torch.bool)
        for node in range(1, n):  # parents precede children, so one pass suffices
            mask[node] |= mask[int(self.parents[node])]
        return mask

    def first(self, size: int) -> "DraftTree":
        """The tree of the root and the first `size` nodes (a tree, since parents precede children).

        For a best-first tree this is the best tree of that size. A cut sampled
        tree is no longer what its draws made, so it keeps no draw record.
        """
        if not 0 <= size <= self.size:
            raise ValueError(f"cannot keep {size} nodes of a tree with {self.size}")
        if size == self.size:
            return self
        end = size + 1
        return DraftTree(tokens=self.tokens[:end], parents=self.parents[:end], draft_logp=self.draft_logp[:end],
                         budget=self.budget)

    def path(self, node: int) -> list[int]:
        """Node indices from the root to `node`, inclusive."""
        return path_of(self.parents, node)

    def levels(self) -> list[torch.Tensor]:
        """Node indices grouped by depth (depth 1, 2, ...), for level-parallel passes."""
        return [torch.nonzero(self.depths == d).flatten() for d in range(1, self.max_depth + 1)]

    def to_dict(self) -> dict[str, Any]:
        data = {
            "tokens": self.tokens.tolist(),
            "parents": self.parents.tolist(),
            "draft_logp": [float(x) for x in self.draft_logp.tolist()],
            "depths": self.depths.tolist(),
            "budget": self.budget,
        }
        if self.draws is not None:
            data["draws"] = self.draws.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DraftTree":
        if not isinstance(data, dict):
            raise ValueError(f"not a draft tree record: expected an object, got {type(data).__name__}")
        try:
            draws = DrawRecord.from_dict(data["draws"]) if data.get("draws") is not None else None
            tree = cls(tokens=data["tokens"], parents=data["parents"], draft_logp=data["draft_logp"],
                       budget=data.get("budget"), draws=draws)
        except KeyError as err:
            raise ValueError(f"not a draft tree record: no {err} field") from None
        if "depths" in data and data["depths"] != tree.depths.tolist():
            raise ValueError("stored depths disagree with the parents: depth must be parent depth + 1")
        return tree

    @classmethod
    def root_only(cls, root_token: int) -> "DraftTree":
        """The empty tree: what an autoregressive step scores."""
        return cls(tokens=torch.tensor([root_token]), parents=torch.tensor([-1]), draft_logp=torch.zeros(1))


def path_of(parents: Sequence[int] | torch.Tensor, node: int) -> list[int]:
    """Node indices from the root (node 0) to `node`, inclusive, in a tree given by its parents."""
    out = [int(node)]
    while out[-1] != 0:
        out.append(int(parents[out[-1]]))
    return out[::-1]


def union(trees: Sequence[DraftTree]) -> tuple[DraftTree, list[torch.Tensor]]:
    """One tree holding every token path of `trees` (all on the same root), and per tree its nodes' indices in it.

    The target's logits at a node depend only on the node's path, so scoring
    the union once gives every tree's node logits (`union_logits[where[k]]`):
    several drafters' trees at one round start cost one target forward, and
    the paths they share are scored once. A shared node keeps the draft
    log-probability of the first tree that has it.
    """
    if not trees:
        raise ValueError("a union needs at least one tree")
    root = int(trees[0].tokens[0])
    if any(int(tree.tokens[0]) != root for tree in trees):
        raise ValueError("every tree of a union must start from the same root token")
    tokens, parents, logp = [root], [-1], [0.0]
    index: dict[tuple[int, int], int] = {}  # (parent in the union, token) -> node in the union
    where = []
    for tree in trees:
        mapped = [0]
        for parent, token, value in zip(tree.parents.tolist()[1:], tree.tokens.tolist()[1:],
                                        tree.draft_logp.tolist()[1:]):
            key = (mapped[parent], token)
            if key not in index:
                index[key] = len(tokens)
                tokens.append(token)
                parents.append(key[0])
                logp.append(value)
            mapped.append(index[key])
        where.append(torch.tensor(mapped))
    return DraftTree(tokens=torch.tensor(tokens), parents=torch.tensor(parents), draft_logp=torch.tensor(logp)), where


def _vector(values: Any, name: str, integer: bool) -> torch.Tensor:
    """A 1-D CPU tensor (long ids or float32 log-probs); floats as ids and other shapes are refused, not cast."""
    try:
        tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise ValueError(f"{name} must be a 1-D sequence of numbers: {err}") from None
    if tensor.numel() == 0 and tensor.dim() == 1:
        tensor = tensor.long() if integer else tensor  # [] reads as float; the size check names the problem
    if tensor.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one entry per node), got shape {tuple(tensor.shape)}")
    if integer and (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool):
        raise ValueError(f"{name} must be integer ids, got {str(tensor.dtype).removeprefix('torch.')} values")
    if not integer and (tensor.is_complex() or tensor.dtype == torch.bool):
        raise ValueError(f"{name} must be real numbers, got {str(tensor.dtype).removeprefix('torch.')}")
    return tensor.to(device="cpu", dtype=torch.long if integer else torch.float32)


def _validated_depths(
    tokens: torch.Tensor, parents: torch.Tensor, draft_logp: torch.Tensor, budget: int | None
) -> torch.Tensor:
    """Check the tree's invariants and return each node's depth."""
    n = tokens.numel()
    if n == 0:
        raise ValueError("a draft tree needs at least the root node")
    if parents.numel() != n or draft_logp.numel() != n:
        raise ValueError(
            f"tokens, parents and draft_logp must have one entry per node; got {n}, {parents.numel()}, {draft_logp.numel()}"
        )
    if int(parents[0]) != -1:
        raise ValueError("node 0 must be the root: parents[0] must be -1")
    if (tokens < 0).any() or (tokens > MAX_TOKEN_ID).any():
        raise ValueError(f"token ids must be non-negative and at most {MAX_TOKEN_ID}, "
                         f"got {int(tokens.min())}..{int(tokens.max())}")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise ValueError(f"budget must be >= 0 and an integer, got {budget!r}")
        if n - 1 > int(budget):
            raise ValueError(f"the tree has {n - 1} nodes, more than its budget {budget}")
    if torch.isnan(draft_logp).any() or (draft_logp > 1e-5).any():
        raise ValueError("draft log-probabilities must be <= 0 and not NaN")
    index = torch.arange(n)
    if n > 1 and ((parents[1:] < 0) | (parents[1:] >= index[1:])).any():
        bad = int(index[1:][(parents[1:] < 0) | (parents[1:] >= index[1:])][0])
        raise ValueError(f"node {bad} has parent {int(parents[bad])}: parents must precede their children")
    depths = torch.zeros(n, dtype=torch.long)
    for node in range(1, n):
        depths[node] = depths[int(parents[node])] + 1
    if n > 1:
        pairs = parents[1:] * (int(tokens.max()) + 1) + tokens[1:]
        if torch.unique(pairs).numel() != n - 1:
            raise ValueError("siblings must carry distinct tokens")
    return depths
