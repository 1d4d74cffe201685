"""The workshop's coupling preset: at depth 1, a node drawn from q and verified by rrs against a fixed guess.

A fixed tree holds the drafter's argmax x and any exact-given-tree rule
accepts it with p(x). A node drawn from q and verified by recursive rejection
is accepted with sum over x of q(x) min(1, p(x)/q(x)) = 1 - TV(p, q). Both
numbers come from the engine's laws (the fixed tree's flow; rrs's law on the
one-node sampled tree for each token it can draw, weighted by q), and their
empirical rates over many rounds from the studio (`tevcore.studio.workshop.coupling_rounds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from tevcore.engine.builders import chain
from tevcore.engine.flow import target_flow
from tevcore.engine.sampled import SampledShape, depth_rows, grow_sampled
from tevcore.engine.draft_rows import as_draft_rows
from tevcore.engine.tree import DraftTree
from tevcore.verify.registry import rule_law

from tevcore.studio.compact import OTHER
from tevcore.studio.workshop_tables import ROOT

COUPLING_COLUMNS = ["token", "p", "q"]
COUPLING_PRESET = "coupling: a sampled draw against a fixed guess"
ONE_DRAW = SampledShape("iid", (1,))


def coupling_presets() -> dict[str, pd.DataFrame]:
    """p = q uniform over 10 tokens: the fixed guess is accepted with 0.1, the coupled draw with 1."""
    tokens = [" cat", " dog", " bird", " fish", " cow", " pig", " hen", " fox", " owl", " bee"]
    frame = pd.DataFrame({"token": tokens, "p": [0.1] * 10, "q": [0.1] * 10}, columns=COUPLING_COLUMNS)
    return {COUPLING_PRESET: frame.astype({"token": "string", "p": "float64", "q": "float64"})}


@dataclass(frozen=True)
class Coupling:
    """p and q on the table's tokens (index 0 the root, the last '(other)'), the fixed guess and both laws."""

    vocab: list[str]
    p: torch.Tensor  # (V,) float64, the target's row after the context
    q: torch.Tensor  # (V,) float64, the drafter's row
    fixed_tree: DraftTree  # the one-node fixed tree: the drafter's argmax
    fixed_accept: float  # p(guess): P of the fixed node under the exit law
    sampled_accept: float  # rrs on a one-node tree drawn from q, over the draw: 1 - TV(p, q)

    @property
    def guess(self) -> int:
        return int(self.fixed_tree.tokens[1])

    @property
    def node_logits(self) -> torch.Tensor:
        """Rows of the root and of the one node (the row after the node only feeds the bonus after it)."""
        return self.p.log().expand(2, -1).clone()


def _column(table: pd.DataFrame, name: str, row: int, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"row {row}: {name} must be a number") from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise ValueError(f"row {row}: {name} must lie in [0, 1], got {value}")
    return number


def coupling(table: pd.DataFrame) -> Coupling:
    """The edited table checked and turned into p, q and both depth-1 laws; ValueError with a plain message."""
    missing = [c for c in COUPLING_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"the table needs the columns {', '.join(missing)}")
    tokens, p, q = [], [], []
    for i, row in enumerate(table.to_dict("records"), start=1):
        token = row.get("token")
        if token is None or pd.isna(token) or str(token) == "":
            if all(pd.isna(row.get(c)) for c in ("p", "q")):
                continue  # an empty row the editor added
            raise ValueError(f"row {i}: the token is empty")
        if str(token) in (ROOT, OTHER):
            raise ValueError(f"row {i}: {token!r} is reserved")
        tokens.append(str(token))
        p.append(_column(table, "p", i, row.get("p")))
        q.append(_column(table, "q", i, row.get("q")))
    if not tokens:
        raise ValueError("the table needs at least one token")
    if len(set(tokens)) != len(tokens):
        raise ValueError("every token must appear once")
    for name, values in (("p", p), ("q", q)):
        if sum(values) > 1.0 + 1e-9:
            raise ValueError(f"{name} adds up to {sum(values):.3f} > 1")
    rows = torch.tensor([[0.0] + p + [0.0], [0.0] + q + [0.0]], dtype=torch.float64)
    rows[:, -1] = (1.0 - rows.sum(-1)).clamp_min(0.0)  # what the rows leave of 1 goes to '(other)'
    p_row, q_row = rows[0] / rows[0].sum(), rows[1] / rows[1].sum()
    logits = p_row.log().expand(2, -1).clone()
    fixed = chain(0, q_row.log().unsqueeze(0), 1)
    fixed_accept = float(target_flow(fixed, logits, 1.0, missing_k=0).path_prob[1])
    draft_rows = depth_rows(as_draft_rows(q_row.log().float().unsqueeze(0)), ONE_DRAW)
    sampled_accept = 0.0
    for token in torch.nonzero(q_row > 0).flatten().tolist():  # every draw the one-node sampled tree can make
        tree = grow_sampled(0, draft_rows, ONE_DRAW, None, 1.0, lambda row, k, replace, token=token: [token])
        sampled_accept += float(q_row[token]) * float(rule_law("rrs", tree, logits, 1.0).exit_probs[1])
    return Coupling([ROOT] + tokens + [OTHER], p_row, q_row, fixed, fixed_accept, sampled_accept)

