"""`DrawRecord`: how a sampled tree was drawn, so a proposal-ratio verifier can divide by the very q.

A sampled builder draws each node's children from the drafter's proposal
q(.|node) (at the round's temperature, after any lookup mixing): i.i.d.
("iid", equal draws share one child node) or without replacement ("wor").
A mixed tree also has FIXED children: a draw from a point mass (the node's
top-1 token of q, chosen, not drawn). A node's fixed draws come first; its
drawn children then come from q with the fixed tokens removed (and, without
replacement, the earlier draws too), renormalised: `proposal_of_try` says
which row each try was drawn from, the one statement of that law
(`proposal_prob_of_try` gives its value at the drawn token from the
recorded q alone). That is the DRAW order; rrs verifies a mixed node in its
own order, the drawn siblings first (`verify/ratio_tables.py`).
The record keeps every draw in order (the node it was drawn at, the child
node it landed on, the drafter's q of the drawn token in the node's full row,
whether it was fixed) and, in memory only, the full proposal rows the
verifier needs for its residuals. A trace keeps the draws but not the rows,
which is what a page needs to replay and show the draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

DRAW_MODES = ("iid", "wor")
SLACK = 1e-6  # float rounding a written probability may carry past [0, 1]
Q_AGREEMENT = 1e-4  # relative gap allowed between a draw's q and exp of its node's float32 draft log-prob


@dataclass(frozen=True)
class DrawRecord:
    """Draws in order: `parents[i]` drew the token of node `children[i]` with proposal probability `q[i]`.

    `rows` (R x V probabilities) and `row_of` ((N+1,) index into `rows`, -1
    where a node drew nothing) are the proposals themselves; None when the
    record was read from a trace. `fixed[i]` marks a point-mass draw (a mixed
    tree's fixed child); None means no draw is fixed.
    """

    mode: str
    parents: torch.Tensor  # (D,) long
    children: torch.Tensor  # (D,) long
    q: torch.Tensor  # (D,) float64: the drafter's q of the drawn token (its node's full row)
    rows: torch.Tensor | None = None
    row_of: torch.Tensor | None = None
    fixed: torch.Tensor | None = None  # (D,) bool

    def __post_init__(self) -> None:
        if self.mode not in DRAW_MODES:
            raise ValueError(f"draw mode must be one of {', '.join(DRAW_MODES)}, got {self.mode!r}")
        for name in ("parents", "children", "q"):
            try:
                value = getattr(self, name)
                value = value if isinstance(value, torch.Tensor) else torch.as_tensor(
                    value, dtype=torch.float64 if name == "q" else None)
            except (TypeError, ValueError, RuntimeError) as err:
                raise ValueError(f"draws {name} must be a list of numbers: {err}") from None
            if value.dim() != 1:
                raise ValueError(f"draws {name} must be 1-D, got shape {tuple(value.shape)}")
            object.__setattr__(self, name, value.to("cpu", torch.float64 if name == "q" else torch.long))
        if not self.parents.numel() == self.children.numel() == self.q.numel():
            raise ValueError("draws need one parent, child and q per draw")
        if not bool(torch.isfinite(self.q).all()) or bool((self.q < -SLACK).any() or (self.q > 1 + SLACK).any()):
            raise ValueError("drawn q must hold finite probabilities in [0, 1]")
        if (self.rows is None) != (self.row_of is None):
            raise ValueError("draws need both the proposal rows and the row of each node, or neither")
        try:
            fixed = torch.zeros(self.parents.numel(), dtype=torch.bool) if self.fixed is None else \
                torch.as_tensor(self.fixed, dtype=torch.bool).cpu()
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"draws fixed must be a list of booleans: {err}") from None
        if tuple(fixed.shape) != tuple(self.parents.shape):
            raise ValueError("draws need one fixed flag per draw")
        object.__setattr__(self, "fixed", fixed)

    @property
    def mixed(self) -> bool:
        """Whether some child was fixed (a point-mass draw) rather than drawn from q."""
        return bool(self.fixed.any())

    def check_tree(self, parents: torch.Tensor, draft_logp: torch.Tensor) -> None:
        """Every draw lands on a child of the node it was drawn at; every non-root node was drawn; a drawn token
        had q > 0 (a token of probability zero is never drawn), and q agrees with the draft log-prob the tree
        keeps for the node it landed on (both are the proposal at the round's temperature).

        A fixed child is a point-mass draw, but its `q` is still the drafter's q of its token in the node's full
        row, so the same q checks hold for it; it must also be that row's top-1 (no drawn sibling has more q),
        come before the node's drawn children, and never be drawn again.
        """
        n = parents.numel()
        if bool((self.q <= 0).any()):
            raise ValueError("a drawn token has q = 0: a draw from q never lands on a token q gives no mass")
        if self.children.numel() and (int(self.children.min()) < 1 or int(self.children.max()) >= n):
            raise ValueError(f"draws land on nodes outside the tree's 1..{n - 1}")
        if bool((parents[self.children] != self.parents).any()):
            raise ValueError("a draw lands on a node that is not a child of the node it was drawn at")
        if torch.unique(self.children).numel() != n - 1:
            raise ValueError("every non-root node of a sampled tree must come from a draw")
        if self.mode == "wor" and torch.unique(self.children).numel() != self.children.numel():
            raise ValueError("draws without replacement cannot land on one node twice")
        kept = draft_logp.double()[self.children].exp()
        if bool(((kept - self.q).abs() > Q_AGREEMENT * self.q).any()):
            at = int(((kept - self.q).abs() > Q_AGREEMENT * self.q).nonzero()[0])
            raise ValueError(f"draw {at} has q = {float(self.q[at]):.6g} but its node {int(self.children[at])} "
                             f"keeps the draft probability {float(kept[at]):.6g}: the draws and the tree disagree")
        if self.mixed:
            for node in torch.unique(self.parents[self.fixed]).tolist():
                flags = self.fixed[self.parents == node]
                if bool(flags[int(flags.sum()):].any()):
                    raise ValueError(f"node {node}'s fixed children must come before its drawn ones")
                tried = self.children[self.parents == node]
                if bool(torch.isin(tried[~flags], tried[flags]).any()):
                    raise ValueError(f"node {node} drew one of its fixed children again: a mixed tree draws from q "
                                     "without them")
                if bool((self.q[self.parents == node][~flags] > self.q[self.parents == node][flags].min()).any()):
                    raise ValueError(f"node {node}'s fixed child has less q than a drawn sibling: a fixed child is "
                                     "its node's top-1 of q")
        if self.row_of is not None and tuple(self.row_of.shape) != (n,):
            raise ValueError(f"row_of must have one entry per node ({n})")

    def at(self, node: int) -> tuple[list[int], list[float]]:
        """The child nodes `node` drew, in draw order (repeats included), and q of each draw."""
        where = torch.nonzero(self.parents == node).flatten()
        return self.children[where].tolist(), self.q[where].tolist()

    def fixed_at(self, node: int) -> list[bool]:
        """Per draw of `node`, in draw order, whether it was a fixed (point-mass) child."""
        return self.fixed[self.parents == node].tolist()

    def proposal(self, node: int) -> torch.Tensor:
        """(V,) float64: the q `node` drew its children from."""
        if self.rows is None or self.row_of is None or int(self.row_of[node]) < 0:
            raise ValueError(f"the proposal node {node} drew from is not kept (a tree read from a trace has only "
                             "the drawn q)")
        return self.rows[int(self.row_of[node])].double()

    def proposal_of_try(self, node: int, i: int, tokens: torch.Tensor) -> torch.Tensor:
        """(V,) float64: the law `node`'s i-th draw (0-based) came from; `tokens` are the tree's node tokens.

        A fixed draw: the point mass on its token. A drawn one: q without the
        node's fixed tokens and, without replacement, without its earlier
        draws, renormalised (q itself for a plain i.i.d. draw).
        """
        where = torch.nonzero(self.parents == node).flatten()
        token = tokens[self.children[where[i]]]
        if bool(self.fixed[where[i]]):
            return torch.zeros_like(self.proposal(node)).index_fill_(0, token.reshape(1), 1.0)
        earlier = self._removed_before(where, i)
        row = self.proposal(node)
        if not earlier.numel():
            return row
        row = row.index_fill(0, tokens[self.children[earlier]], 0.0)
        return row / row.sum().clamp_min(1e-300)

    def proposal_prob_of_try(self, node: int, i: int) -> float:
        """The probability `proposal_of_try` gives the token `node`'s i-th draw landed on, from the recorded q
        alone (a tree read from a trace has it too): 1 for a fixed draw, else q(x) over the q mass left once the
        removed tokens (the fixed ones and, without replacement, the earlier draws) are taken out."""
        where = torch.nonzero(self.parents == node).flatten()
        if bool(self.fixed[where[i]]):
            return 1.0
        removed = float(self.q[self._removed_before(where, i)].sum())  # distinct tokens: fixed ones, or w/o repl.
        return float(self.q[where[i]]) / max(1.0 - removed, 1e-300)

    def _removed_before(self, where: torch.Tensor, i: int) -> torch.Tensor:
        """Indices (into the record) of the draws before the i-th at a node whose tokens its proposal lacks: the
        fixed ones and, without replacement, every earlier draw."""
        return where[:i] if self.mode == "wor" else where[:i][self.fixed[where[:i]]]

    def to_dict(self) -> dict[str, Any]:
        data = {"mode": self.mode, "parents": self.parents.tolist(), "children": self.children.tolist(),
                "q": self.q.tolist()}
        if self.mixed:
            data["fixed"] = self.fixed.tolist()
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "DrawRecord":
        if not isinstance(data, dict):
            raise ValueError("draws must be an object with mode, parents, children and q")
        missing = [key for key in ("mode", "parents", "children", "q") if data.get(key) is None]
        if missing:
            raise ValueError(f"draws have no {missing[0]!r} field")
        return cls(mode=data["mode"], parents=data["parents"], children=data["children"], q=data["q"],
                   fixed=data.get("fixed"))
