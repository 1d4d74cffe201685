"""Verifiers: a scored draft tree -> an accepted root path and one bonus token.

Every verifier has one calling convention,
`verify(tree, node_logits, temperature, generator, flow=None) -> Verdict`, where
row v of `node_logits` is the target's logits after the context plus path(v)
and `flow` is the round's target flow when the caller already has it (the
decoding loop does). A verifier is the n = 1 case of its rule's batched
sampler (`rules.py`) followed by the shared bonus draw (`bonus.py`); `draw`
is the same for any n. The exact ones (`EXACT_VERIFIERS`) emit blocks
distributed as target samples; `greedy` is exact for T = 0, the law it always
decodes; `naive_ratio` is NOT exact and exists only as a foil the
statistical tests must catch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from typing import Protocol

import torch

from tevcore.engine.flow import TargetFlow
from tevcore.engine.tree import DraftTree
from tevcore.verify.bonus import draw_bonus
from tevcore.verify.registry import (RULES, Rule, check_pairing, check_tree_pairing, get_rule, rules_for,
                                     verifier_label)
from tevcore.verify.scored import ScoredRound, chain_subtree, scored_round

__all__ = ["Verdict", "Verifier", "VERIFIERS", "SAMPLED_VERIFIERS", "ALL_VERIFIERS", "EXACT_VERIFIERS", "NOT_EXACT",
           "get_rule", "get_verifier", "verifier_label", "check_pairing", "rules_for", "draw", "decide", "chain_subtree"]


@dataclass(frozen=True)
class Verdict:
    """What a verifier decided: the accepted root path (from node 0), its last node and the bonus token."""

    path: list[int]
    exit_node: int
    bonus_token: int

    @property
    def emitted(self) -> int:
        """L, the tokens this round emits: the accepted draft tokens plus the bonus, depth(exit) + 1 (as in
        `RoundRecord.emitted`)."""
        return len(self.path)


class Verifier(Protocol):
    def __call__(self, tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                 generator: torch.Generator, flow: TargetFlow | None = None) -> Verdict: ...


def draw(rule: Rule, round_: ScoredRound, generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n independent verdicts of one round: (exit nodes, bonus tokens), each (n,)."""
    exits = rule.exits(round_, generator, n)
    return exits, draw_bonus(rule, round_, exits, generator)


def decide(rule: Rule, tree: DraftTree, node_logits: torch.Tensor, temperature: float,
           generator: torch.Generator, flow: TargetFlow | None = None) -> Verdict:
    """One verdict: `draw` with n = 1 on the validated round (a tree the rule may not run on is refused first)."""
    check_tree_pairing(rule.name, tree)
    round_ = scored_round(tree, node_logits, temperature, flow)
    exits, bonus = draw(rule, round_, generator, 1)
    exit_node = int(exits[0])
    return Verdict(tree.path(exit_node), exit_node, int(bonus[0]))


@cache
def _verifier(rule: Rule) -> Verifier:
    """The one verifier function of a rule (the same object every time it is asked for)."""
    return partial(decide, rule)


# views of the registry's entries at import (front ends ask the registry itself, which a test may extend): every
# verifier, the rules that run on any tree, and those that need something of it
ALL_VERIFIERS: dict[str, Verifier] = {name: _verifier(rule) for name, rule in RULES.items()}
VERIFIERS: dict[str, Verifier] = {name: v for name, v in ALL_VERIFIERS.items() if not RULES[name].needs}
SAMPLED_VERIFIERS: dict[str, Verifier] = {name: v for name, v in ALL_VERIFIERS.items() if RULES[name].needs}
EXACT_VERIFIERS = tuple(name for name, rule in RULES.items() if rule.exact and not rule.needs)
NOT_EXACT = {name for name, rule in RULES.items() if not rule.exact}


def get_verifier(name: str) -> Verifier:
    """The verifier of the rule registered under `name`."""
    return _verifier(get_rule(name))
