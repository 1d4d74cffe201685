"""A proposer's per-depth draft rows, some of them conditioned on the path above them.

A block drafter's plain pass gives one row per depth that every sibling
shares, so the depth-2 row has to hedge over all depth-1 tokens. A drafter
trained with known slots can run more passes that are given a path's
leading tokens: for its likeliest depth-1 tokens up front (`after_first`),
and on demand for any path a drawn tree reaches (`below_path`), so a drawn
sibling's subtree is drafted for that sibling instead of for the top-1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

# below_path(paths) -> for each path of tokens (depths 1..L), the (K - L) x V rows of depths L+1..K from a pass
# that is given that path
BelowPath = Callable[[list[tuple[int, ...]]], list[torch.Tensor]]


@dataclass(frozen=True)
class DraftRows:
    """`shared` (K x V): depth d's log-probs on any path; `after_first[t]` ((K-1) x V): depths 2..K below
    the depth-1 token t; `below_path`: rows below any path of at most `known_depth` tokens, computed when asked
    (None where the proposer cannot condition on a path)."""

    shared: torch.Tensor
    after_first: dict[int, torch.Tensor] = field(default_factory=dict)
    below_path: BelowPath | None = field(default=None, compare=False)
    known_depth: int = 0

    def __post_init__(self) -> None:
        if self.shared.dim() != 2 or self.shared.shape[0] == 0:
            raise ValueError(f"per-depth draft log-probs must be a non-empty K x V tensor, "
                             f"got shape {tuple(self.shared.shape)}")
        depth, vocab = self.shared.shape
        for token, rows in self.after_first.items():
            if tuple(rows.shape) != (depth - 1, vocab):
                raise ValueError(f"rows below depth-1 token {token} must be {depth - 1} x {vocab}, "
                                 f"got {tuple(rows.shape)}")

    @property
    def depth(self) -> int:
        return int(self.shared.shape[0])

    @property
    def vocab_size(self) -> int:
        return int(self.shared.shape[1])

    def row(self, depth: int, first_token: int | None) -> torch.Tensor:
        """Depth `depth`'s row (1-based) on a path whose depth-1 token is `first_token`."""
        below = self.after_first.get(first_token) if depth > 1 else None
        return below[depth - 2] if below is not None else self.shared[depth - 1]

    def to_cpu_float(self) -> DraftRows:
        """A checked float32 CPU copy (what the builders work on)."""
        inner = self.below_path
        below_path = None if inner is None else (
            lambda paths: [r.detach().float().cpu() for r in inner(paths)])
        rows = DraftRows(self.shared.detach().float().cpu(),
                         {t: r.detach().float().cpu() for t, r in self.after_first.items()}, below_path,
                         self.known_depth)
        if any(torch.isnan(r.amax()) for r in (rows.shared, *rows.after_first.values())):  # amax keeps a NaN, cheaply
            raise ValueError("per-depth draft log-probs contain NaN")
        return rows


def as_draft_rows(rows: torch.Tensor | DraftRows) -> DraftRows:
    """A plain K x V tensor is rows that every path shares."""
    return rows if isinstance(rows, DraftRows) else DraftRows(torch.as_tensor(rows))
