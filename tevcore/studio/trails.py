"""Sampled rounds for the explorer: a round's rrs or block trail, the sibling diagnostics of a run and each node's
rank among its siblings.

The trail comes from `tevcore.verify.trail` on the round's node logits and
its tree's proposal rows; the diagnostics and ranks from `tevcore.lab.siblings`.
This module only picks which rule's trail and which verdict it explains, and
shapes the outputs into tables. One round's trail is one verdict on one tree
(no model call), so it is no queued service.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from tevcore.engine.records import RoundRecord
from tevcore.engine.sampling import make_generator
from tevcore.lab.siblings import sibling_diagnostics, sibling_ranks
from tevcore.verify.registry import RULES
from tevcore.verify.scored import scored_round
from tevcore.verify.trail import BlockTrail, RrsTrail
from tevcore.verify.verifiers import get_verifier

__all__ = ["BlockTrail", "RrsTrail", "RoundTrail", "round_trail", "sibling_ranks", "siblings_frames", "trail_rule"]


@dataclass(frozen=True)
class RoundTrail:
    """A trail of a round under `rule`; `recorded` says whether it explains the round's own verdict or a fresh one."""

    trail: RrsTrail | BlockTrail
    rule: str
    recorded: bool


def trail_rule(record: RoundRecord) -> str:
    """Whose trail a sampled round shows: its own verifier's where that rule has one, else that of the first rule
    in the registry with a trail that may run on the round's tree (on a fixed tree, the first with a trail, which
    `round_trail` then refuses in one line)."""
    if record.verifier in RULES and RULES[record.verifier].trail is not None:
        return record.verifier
    with_trail = [name for name, rule in RULES.items() if rule.trail is not None]
    return next((name for name in with_trail if not RULES[name].needs - record.tree.traits), with_trail[0])


def round_trail(record: RoundRecord, node_logits: torch.Tensor, seed: int = 0) -> RoundTrail:
    """The trail of a sampled round under `trail_rule`: of its own verdict when that rule decided it, else of a
    verdict drawn now (generator seeded with `seed`) on the same tree and logits. A ValueError says why there is
    none."""
    tree, rule = record.tree, trail_rule(record)
    if tree.draws is None:
        raise ValueError(f"round {record.index} has a fixed tree (builder {record.builder}): {rule} needs a sampled one")
    round_ = scored_round(tree, node_logits, record.temperature)
    if record.verifier == rule and record.path:
        return RoundTrail(RULES[rule].trail(round_, list(record.path), int(record.bonus_token)), rule, recorded=True)
    verdict = get_verifier(rule)(tree, node_logits, record.temperature, make_generator(seed))
    return RoundTrail(RULES[rule].trail(round_, verdict.path, verdict.bonus_token), rule, recorded=False)


def siblings_frames(records: list[RoundRecord]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`sibling_diagnostics` of the rounds as two tables: by (depth, rank), and the next depth after a pick."""
    diagnostics = sibling_diagnostics(records)
    by_rank = pd.DataFrame(diagnostics["by_rank"], columns=["depth", "rank", "nodes", "accepted", "share"])
    after = pd.DataFrame(diagnostics["after_pick"], columns=["depth", "pick", "rounds", "next_accepted", "share"])
    return by_rank, after
