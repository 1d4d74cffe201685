"""`DrawRecord`: how a sampled tree was drawn, so a proposal-ratio verifier can divide by the very q.

A sampled builder draws each node's children from the drafter's proposal
q(.|node) (at the round's temperature, after any lookup mixing): i.i.d.
("iid", equal draws share one child node) or without replacement ("wor").
The record keeps every draw in order (the node it was drawn at, the child
node it landed on, q of the drawn token) and, in memory only, the full
proposal rows the verifier needs for its residuals. A trace keeps the draws
but not the rows, which is what a page needs to replay and show the draws.
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
    record was read from a trace.
    """

    mode: str
    parents: torch.Tensor  # (D,) long
    children: torch.Tensor  # (D,) long
    q: torch.Tensor  # (D,) float64
    rows: torch.Tensor | None = None
    row_of: torch.Tensor | None = None

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

    def check_tree(self, parents: torch.Tensor, draft_logp: torch.Tensor) -> None:
        """Every draw lands on a child of the node it was drawn at; every non-root node was drawn; a drawn token
        had q > 0 (a token of probability zero is never drawn), and q agrees with the draft log-prob the tree
        keeps for the node it landed on (both are the proposal at the round's temperature)."""
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
        if self.row_of is not None and tuple(self.row_of.shape) != (n,):
            raise ValueError(f"row_of must have one entry per node ({n})")

    def at(self, node: int) -> tuple[list[int], list[float]]:
        """The child nodes `node` drew, in draw order (repeats included), and q of each draw."""
        where = torch.nonzero(self.parents == node).flatten()
        return self.children[where].tolist(), self.q[where].tolist()

    def proposal(self, node: int) -> torch.Tensor:
        """(V,) float64: the q `node` drew its children from."""
        if self.rows is None or self.row_of is None or int(self.row_of[node]) < 0:
            raise ValueError(f"the proposal node {node} drew from is not kept (a tree read from a trace has only "
                             "the drawn q)")
        return self.rows[int(self.row_of[node])].double()

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "parents": self.parents.tolist(), "children": self.children.tolist(),
                "q": self.q.tolist()}

    @classmethod
    def from_dict(cls, data: Any) -> "DrawRecord":
        if not isinstance(data, dict):
            raise ValueError("draws must be an object with mode, parents, children and q")
        missing = [key for key in ("mode", "parents", "children", "q") if data.get(key) is None]
        if missing:
            raise ValueError(f"draws have no {missing[0]!r} field")
        return cls(mode=data["mode"], parents=data["parents"], children=data["children"], q=data["q"])
