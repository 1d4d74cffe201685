"""Sampled rounds for the explorer: the rrs trail of a round and the sibling diagnostics of a run (no streamlit).

The trail comes from `tevcore.verify.trail` on the round's node logits and
its tree's proposal rows; the diagnostics from `tevcore.lab.siblings`. This
module only picks which verdict the trail explains and shapes the outputs
into tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from tevcore.engine.records import RoundRecord
from tevcore.engine.sampling import make_generator
from tevcore.lab.siblings import sibling_diagnostics
from tevcore.verify.scored import scored_round
from tevcore.verify.trail import RrsTrail, rrs_trail
from tevcore.verify.verifiers import get_verifier


@dataclass(frozen=True)
class RoundTrail:
    """An rrs trail of a round; `recorded` says whether it explains the round's own verdict or a fresh rrs one."""

    trail: RrsTrail
    recorded: bool


def round_trail(record: RoundRecord, node_logits: torch.Tensor, seed: int = 0) -> RoundTrail:
    """The rrs trail of a sampled round: of its own verdict when rrs decided it, else of an rrs verdict drawn now
    (generator seeded with `seed`) on the same tree and logits. A ValueError says why there is none."""
    tree = record.tree
    if tree.draws is None:
        raise ValueError(f"round {record.index} has a fixed tree (builder {record.builder}): rrs needs a sampled one")
    round_ = scored_round(tree, node_logits, record.temperature)
    if record.verifier == "rrs" and record.path:
        return RoundTrail(rrs_trail(round_, list(record.path), int(record.bonus_token)), recorded=True)
    verdict = get_verifier("rrs")(tree, node_logits, record.temperature, make_generator(seed))
    return RoundTrail(rrs_trail(round_, verdict.path, verdict.bonus_token), recorded=False)


def siblings_frames(records: list[RoundRecord]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`sibling_diagnostics` of the rounds as two tables: by (depth, rank), and the next depth after a pick."""
    diagnostics = sibling_diagnostics(records)
    by_rank = pd.DataFrame(diagnostics["by_rank"], columns=["depth", "rank", "nodes", "accepted", "share"])
    after = pd.DataFrame(diagnostics["after_pick"], columns=["depth", "pick", "rounds", "next_accepted", "share"])
    return by_rank, after
