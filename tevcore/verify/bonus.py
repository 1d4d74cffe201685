"""The bonus draw every rule shares: given the exits, p(.|exit) without the tokens the rule tried there.

One masked inverse-CDF draw over the exit's row when there is one draw (decoding);
for many draws, one categorical call per distinct exit node over the same
masked law (`sampling.masked_draws`), so n = 1e5 costs a few V-wide passes,
not n of them.
"""

from __future__ import annotations

import torch

from tevcore.engine.sampling import masked_draws
from tevcore.verify.rules import Rule
from tevcore.verify.scored import ScoredRound


def bonus_temperature(rule: Rule, round_: ScoredRound) -> float:
    """The temperature a rule's bonus is drawn at: 0 for greedy follow, else the round's."""
    return 0.0 if rule.greedy else round_.temperature


def draw_bonus(rule: Rule, round_: ScoredRound, exits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """(n,) bonus tokens, the i-th from p(.|exits[i]) at T without `rule.banned_at(exits[i])`."""
    temperature = bonus_temperature(rule, round_)
    if exits.numel() == 1:
        node = int(exits[0])
        return masked_draws(round_.logits[node], temperature, rule.banned_at(round_, node), generator, 1)
    bonus = torch.empty_like(exits)
    nodes, slot = torch.unique(exits, return_inverse=True)
    for index, node in enumerate(nodes.tolist()):
        where = torch.nonzero(slot == index).flatten()
        bonus[where] = masked_draws(round_.logits[node], temperature, rule.banned_at(round_, node), generator,
                                    int(where.numel()))
    return bonus
