"""The bonus draw every rule shares: given the exits, p(.|exit) without the tokens the rule tried there.

A proposal-ratio rule draws from its own residual instead, through the same
masked draw. One masked inverse-CDF draw over the exit's row when there is one draw (decoding);
for many draws, one categorical call per distinct exit node over the same
masked law (`sampling.masked_draws`), so n = 1e5 costs a few V-wide passes,
not n of them.
"""

from __future__ import annotations

import torch

from tevcore.engine.sampling import masked_draws
from tevcore.verify.registry import Rule
from tevcore.verify.scored import ScoredRound


def bonus_temperature(rule: Rule, round_: ScoredRound) -> float:
    """The temperature a rule's bonus is drawn at: 0 for greedy follow, else the round's."""
    return 0.0 if rule.greedy else round_.temperature


def _draws_at(rule: Rule, round_: ScoredRound, node: int, generator: torch.Generator, n: int) -> torch.Tensor:
    """n bonus draws at exit `node`: from the rule's own residual there, else the masked row of p."""
    row = rule.bonus_row(round_, node) if rule.bonus_row is not None else None
    if row is not None:  # a law given as probabilities: the same masked draw, over log r at T = 1
        row = row.to(round_.device)
        return masked_draws(row.log(), 1.0, row <= 0, generator, n)
    return masked_draws(round_.logits[node], bonus_temperature(rule, round_), rule.banned_at(round_, node),
                        generator, n)


def draw_bonus(rule: Rule, round_: ScoredRound, exits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """(n,) bonus tokens, the i-th from the rule's bonus law at exits[i]: p(.|exit) at T without
    `rule.banned_at(exit)`, or the rule's residual there (`Rule.bonus_row`)."""
    if exits.numel() == 1:
        return _draws_at(rule, round_, int(exits[0]), generator, 1)
    bonus = torch.empty_like(exits)
    nodes, slot = torch.unique(exits, return_inverse=True)
    for index, node in enumerate(nodes.tolist()):
        where = torch.nonzero(slot == index).flatten()
        bonus[where] = _draws_at(rule, round_, node, generator, int(where.numel())).to(bonus.dtype)
    return bonus
