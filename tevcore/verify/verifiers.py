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
from functools import partial
from typing import Protocol

import torch

from tevcore.engine.flow import TargetFlow
from tevcore.engine.builders import get_builder
from tevcore.engine.tree import DraftTree
from tevcore.verify.bonus import draw_bonus
from tevcore.verify.rules import RULES, Rule
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
    def block_length(self) -> int:
        """Tokens this round emits: the accepted draft tokens plus the bonus, depth(exit) + 1."""
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
    """One verdict: `draw` with n = 1 on the validated round."""
    round_ = scored_round(tree, node_logits, temperature, flow)
    exits, bonus = draw(rule, round_, generator, 1)
    exit_node = int(exits[0])
    return Verdict(tree.path(exit_node), exit_node, int(bonus[0]))


ALL_VERIFIERS: dict[str, Verifier] = {name: partial(decide, rule) for name, rule in RULES.items()}
VERIFIERS: dict[str, Verifier] = {name: v for name, v in ALL_VERIFIERS.items() if RULES[name].trees in ("any", "none")}
SAMPLED_VERIFIERS: dict[str, Verifier] = {name: v for name, v in ALL_VERIFIERS.items() if name not in VERIFIERS}
EXACT_VERIFIERS = tuple(name for name, rule in RULES.items() if rule.exact and rule.trees == "any")
NOT_EXACT = {name for name, rule in RULES.items() if not rule.exact}


def get_rule(name: str) -> Rule:
    """The rule registered under `name`, or a ValueError naming the choices."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown verifier {name!r}; choose one of {', '.join(RULES)}") from None


def get_verifier(name: str) -> Verifier:
    """The verifier registered under `name`."""
    get_rule(name)
    return ALL_VERIFIERS[name]


def check_pairing(verifier: str, builder: str) -> None:
    """Refuse a rule on trees it is not exact on: a proposal-ratio rule on a fixed builder, block off a sampled
    chain, the foil on a mixed tree (whose fixed children were not drawn from the q it divides by)."""
    rule, made = get_rule(verifier), get_builder(builder)
    if rule.trees == "sampled" and not made.sampled:
        raise ValueError(f"verifier {verifier} divides by the q a tree was drawn from, but builder {builder!r} "
                         "builds fixed trees: use sampled:K1,K2,..., sampled-wor:K1,K2,..., mixed:K1,K2,... or "
                         "mixed-wor:K1,K2,...")
    if rule.trees == "none" and made.mixed:
        raise ValueError(f"verifier {verifier} is not exact on any tree, and builder {builder!r} builds mixed trees "
                         "(fixed top-1 children, drawn siblings): use rrs or a rule exact on any tree")
    if rule.trees == "sampled chain" and not made.sampled_chain:
        raise ValueError(f"verifier {verifier} verifies a sampled chain, but builder {builder!r} does not build "
                         "one: use sampled:1,1,...")


def rules_for(builder: str) -> list[str]:
    """Every registered rule valid on `builder`'s trees (the foil included: it runs anywhere), the exact-given-tree
    rules first."""
    valid = []
    for name in [*VERIFIERS, *SAMPLED_VERIFIERS]:
        try:
            check_pairing(name, builder)
        except ValueError:
            continue
        valid.append(name)
    return valid


def verifier_label(name: str) -> str:
    """Display name; the non-exact foil says so wherever it is shown."""
    get_rule(name)
    return f"{name} (NOT exact: teaching foil)" if name in NOT_EXACT else name
