"""The rule registry: each verification rule's facts, stated once in its entry.

An entry says how the rule decides (its exit sampler and bonus), which trees
it may run on (the `TREE_TRAITS` it needs), the law it is tested against and
its standing for the target at a temperature, its trail where it has one, and
how it is named and described. `pairing_problem` is the one function that
decides whether a rule may run on a builder's trees or on a realised tree;
the config, the CLI, bench, rounds-at-context, the trace checks and the app
all ask it, and none of them names a rule. Adding a rule is one entry here
plus its sampler (`rules.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.builder_specs import BUILDER_FAMILIES, BuilderSpec
from tevcore.engine.tree import DRAWN, DRAWN_CHAIN, TREE_TRAITS, DraftTree
from tevcore.verify import rules
from tevcore.verify.laws import (FOIL, OPTIMAL, OVER_DRAWS, OWN_LAW, T0_ONLY, VerdictLaw, block_law, chain_law,
                                 exit_law, greedy_law, rrs_law)
from tevcore.verify.scored import ScoredRound
from tevcore.verify.trail import block_trail, rrs_trail

LawFn = Callable[[DraftTree, torch.Tensor, float], VerdictLaw]
TrailFn = Callable[[ScoredRound, list[int], int], object]


def always(kind: str) -> Callable[[float], str]:
    """A standing that does not depend on the temperature."""
    return lambda temperature: kind


def greedy_standing(temperature: float) -> str:
    """Greedy decodes the T = 0 target whatever the temperature: optimal at T = 0 (its law is then X), else not."""
    return OPTIMAL if temperature == 0 else T0_ONLY


def x_law_label(temperature: float) -> str:
    return f"exit law X(v) at T = {temperature:g}"


@dataclass(frozen=True)
class Rule:
    """A verification rule and every fact about it the package needs.

    `bonus_row`, where given, is the rule's own bonus law at an exit (a
    residual); where it gives None the shared masked draw of p applies.
    """

    name: str
    description: str  # one line: what the rule does and where it is exact
    exits: rules.ExitSampler
    banned_at: rules.BannedAt
    law: LawFn  # the law its verdicts are tested against (for the foil: the law it would need, X)
    standing: Callable[[float], str] = always(OPTIMAL)  # OPTIMAL, OWN_LAW, T0_ONLY, OVER_DRAWS or FOIL at T
    law_label: Callable[[float], str] = x_law_label  # what a chart's legend calls `law`
    needs: frozenset[str] = frozenset()  # the TREE_TRAITS a tree must have for the rule to run on it
    where: str = "runs on any tree"  # why it runs where `needs` says (shown with a refusal and in help texts)
    greedy: bool = False  # decodes the T = 0 target whatever the temperature (its bonus too)
    bonus_row: rules.BonusRow | None = None
    bonus_may_repeat_child: bool = False  # its bonus law may hold a child token of the exit (block's residual)
    trail: TrailFn | None = None  # try-by-try account of a verdict on a scored round, where the rule has one
    trail_note: str = ""  # how to read that trail, where its table alone does not say
    label: str | None = None  # display name where it differs from `name`
    on_drawn: str = ""  # what the rule is on a tree drawn from q, where its standing alone would mislead there
    bonus_text: str = "p at the exit without its children's tokens"  # the bonus law `law` holds, in words

    @property
    def exact(self) -> bool:
        return self.standing(1.0) != FOIL

    @property
    def display(self) -> str:
        return self.label or self.name


RULES: dict[str, Rule] = {rule.name: rule for rule in (
    Rule("tev", "one categorical draw of the exit over X, one masked bonus draw", rules.exits_tev,
         rules.child_token_row, exit_law),
    Rule("predraw", "draw from p at each node and follow the draws while they hit a child", rules.exits_predraw,
         rules.child_token_row, exit_law),
    Rule("residual", "children tried in order, each accepted with the residual's probability of its token",
         rules.exits_residual, rules.child_token_row, exit_law),
    Rule("greedy", "follow the argmax child (the T = 0 target)", rules.exits_greedy, rules.child_token_row,
         greedy_law, standing=greedy_standing, greedy=True,
         law_label=lambda t: "greedy's own law (the T = 0 exit)" if t else x_law_label(t),
         bonus_text="the argmax of p at the exit without its children's tokens"),
    Rule("chain", "standard speculative sampling on the top-1 chain only", rules.exits_chain,
         rules.chain_child_token_row, chain_law, standing=always(OWN_LAW),
         law_label=lambda t: "chain's own law (X of the top-1 chain)",
         bonus_text="p at the exit without only the chain child it tried"),
    Rule("naive_ratio", "accept a child with min(1, p/q): NOT exact, a teaching foil", rules.exits_naive_ratio,
         rules.foil_child_token_row, exit_law, standing=always(FOIL), label="naive_ratio (NOT exact: teaching foil)",
         where="runs on any tree: on a fixed tree nothing was drawn from the q it divides by; on a drawn tree "
               "it divides by the very q but skips the residual update, so it is not exact there either, and "
               "running it beside rrs shows that drawing from q is not enough; on a mixed tree it also divides "
               "a fixed child (a point mass, chosen not drawn) by q",
         on_drawn="NOT exact on drawn trees either: its tries are rrs's first tries, but it never updates the "
                  "residual between siblings and its bonus ignores rrs's residual. On a sampled chain its exits "
                  "are rrs's and only its bonus differs, so its first tokens stay close to the target's row and a "
                  "first-token χ² across rounds rarely catches it; the exact enumeration of its output law does "
                  "(tests/verify/test_sampled_exactness.py). On a mixed tree a fixed child's proposal is a "
                  "point mass, yet the foil divides it by q; rrs divides it by 1 and is exact there "
                  "(tests/verify/test_mixed_exactness.py)."),
    Rule("rrs", "recursive rejection over each node's draws in draw order, except that a mixed node's drawn "
         "siblings are tried first (each divided by q without the fixed child) and its fixed child last, as a "
         "point-mass draw the final residual reaches: that order's node acceptance p(fixed) + sum min(p, q') is "
         "the mixed design's ceiling and never below the fixed-child-first order's; exact over the tree's draws",
         rules.exits_rrs, rules.child_token_row, rrs_law, standing=always(OVER_DRAWS),
         law_label=lambda t: "rrs's own law on this sampled tree", needs=frozenset({DRAWN}),
         where="divides by the q each child was drawn from",
         bonus_row=rules.rrs_bonus_row, trail=rrs_trail, bonus_text="the residual left at the exit",
         trail_note="rrs tries each node's draws in turn, each accepted with min(1, r(x) / proposal(x)): r is the "
                    "residual of the target row left by the earlier tries, proposal(x) the probability the law "
                    "the try was drawn from gave its token (q; q without the fixed child on a mixed node, and "
                    "without the earlier draws when drawn without replacement; 1 for a fixed child). A mixed "
                    "node's drawn siblings come first; its fixed child is tried last, with the whole residual "
                    "left on its token."),
    Rule("block", "block verification of a sampled chain (Sun et al.); exact over the chain's draws",
         rules.exits_block, rules.child_token_row, block_law, standing=always(OVER_DRAWS),
         law_label=lambda t: "block's own law on this sampled tree", needs=frozenset({DRAWN_CHAIN}),
         where="verifies a chain drawn one draw per node", bonus_row=rules.block_bonus_row,
         bonus_may_repeat_child=True, trail=block_trail,
         bonus_text="the block residual at the exit (it may repeat the next chain token)",
         trail_note="Block verification carries a weight w down the chain (w_i = min(1, w_(i-1) p/q)), turns it into "
                    "a stop probability h at each node, and exits at the LAST node whose coin succeeds, reading the "
                    "coins from the chain's end: nodes above the exit are accepted with the block even where their "
                    "own p/q is small."),
)}


def get_rule(name: str) -> Rule:
    """The rule registered under `name`, or a ValueError naming the choices."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown verifier {name!r}; choose one of {', '.join(RULES)}") from None


def pairing_problem(verifier: str, traits: frozenset[str], trees: str) -> str | None:
    """Why rule `verifier` may not run on trees with `traits`, or None: THE pairing decision. `trees` names
    them in the message with its verb ("the trees of builder 'chain' are", "this round's tree is")."""
    rule = get_rule(verifier)
    missing = sorted(rule.needs - traits)
    if not missing:
        return None
    return f"verifier {verifier} {rule.where}; {trees} not {' nor '.join(TREE_TRAITS[m] for m in missing)}"


def check_pairing(verifier: str, builder: BuilderSpec) -> None:
    """Refuse a rule on a builder whose trees it may not run on, in one line."""
    problem = pairing_problem(verifier, builder.traits, f"the trees of builder {builder.name!r} are")
    if problem:
        raise ValueError(problem + f": use {' or '.join(builders_for(verifier))}")


def check_tree_pairing(verifier: str, tree: DraftTree) -> None:
    """Refuse a rule on a realised tree it may not run on (a trace's round)."""
    problem = pairing_problem(verifier, tree.traits, "this round's tree is")
    if problem:
        raise ValueError(problem)


def rules_on(traits: frozenset[str]) -> list[str]:
    """Every registered rule that may run on trees with `traits`, in registry order (the foil included)."""
    return [name for name in RULES if pairing_problem(name, traits, "") is None]


def rules_for(trees: BuilderSpec | DraftTree) -> list[str]:
    """Every registered rule that may run on a builder's trees, or on one realised tree."""
    return rules_on(trees.traits)


def builders_for(verifier: str) -> list[str]:
    """A builder of each family whose trees rule `verifier` may run on: the family's example shape, or the same
    depth with one count per node where only that qualifies (for messages and help)."""
    needs, found = get_rule(verifier).needs, []
    for family in BUILDER_FAMILIES.values():
        example = family.spec(family.example or ())
        for spec in (example, family.spec((1,) * len(example.counts)) if example.counts else example):
            if not needs - spec.traits:
                found.append(spec.name)
                break
    return found


def standing(name: str, temperature: float) -> str:
    """How verifier `name` relates to the target at `temperature` (its entry's standing)."""
    return get_rule(name).standing(temperature)


def law_name(name: str, temperature: float) -> str:
    """The name of the law verifier `name` is tested against (what a chart's legend says)."""
    return get_rule(name).law_label(temperature)


def rule_law(name: str, tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """The law verifier `name` is tested against: its own if exact, X for the foil."""
    return get_rule(name).law(tree, node_logits, temperature)


STANDING_TEXTS = {OPTIMAL: "exact, optimal: exit law X, E[L] = 1 + C", OWN_LAW: "exact, with its own law",
                  T0_ONLY: "exact only for the T = 0 target: not this one (T = {temperature:g})",
                  OVER_DRAWS: "exact over the tree's draws, with its own law on each tree",
                  FOIL: "NOT exact (teaching foil)"}  # a standing in words, as a page's table and legend say it


def standing_text(name: str, temperature: float, drawn: bool = False) -> str:
    """How verifier `name` stands at `temperature`, in words; on a tree drawn from q (`drawn`), a rule whose entry
    says what it is there (`on_drawn`: the foil) says that instead."""
    rule = get_rule(name)
    kind = rule.standing(temperature)
    if drawn and kind == FOIL and rule.on_drawn:
        return rule.on_drawn
    return STANDING_TEXTS[kind].format(temperature=temperature)


def held_to_x(name: str, temperature: float) -> bool:
    """Whether verifier `name`'s verdicts are tested against the exit law X itself and X's bonus law at
    `temperature`: the optimal rules, and the foil, which would need them to be exact."""
    return standing(name, temperature) in (OPTIMAL, FOIL)


def laws_held_to_text(names: list[str], temperature: float) -> str:
    """What the verdicts of each of `names` are tested against, rules with one law and one bonus named together,
    in registry order ("exit law X(v) at T = 1, bonus from ... (tev, predraw)")."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name in (name for name in RULES if name in names):
        rule = RULES[name]
        groups.setdefault((rule.law_label(temperature), rule.bonus_text), []).append(name)
    return "; ".join(f"{law}, bonus from {bonus} ({', '.join(group)})" for (law, bonus), group in groups.items())


def verifier_label(name: str) -> str:
    """Display name; the non-exact foil says so wherever it is shown."""
    return get_rule(name).display


def verifier_help() -> str:
    """The help of a verifier flag, from the entries."""
    return "; ".join(f"{rule.name} = {rule.description}" + ("" if not rule.needs else f" ({rule.where})")
                     for rule in RULES.values())


def valid_pairs(builders: list[BuilderSpec], verifiers: list[str]) -> list[tuple[BuilderSpec, str]]:
    """Every (builder, verifier) the registry lets run together (`rules_for`), in the order given."""
    for verifier in verifiers:
        get_rule(verifier)  # an unknown name is refused, not skipped
    pairs = [(builder, verifier) for builder in builders for verifier in verifiers if verifier in rules_for(builder)]
    if not pairs:
        raise ValueError(f"no verifier of {', '.join(verifiers)} runs on the trees of "
                         f"{', '.join(b.name for b in builders)}")
    return pairs


def skipped_pairs(builders: list[BuilderSpec], verifiers: list[str]) -> list[str]:
    """A line per (builder, verifier) of the flags that `valid_pairs` leaves out, saying why (the registry's
    `pairing_problem`), so a table without a column the user asked for is never a surprise."""
    return [f"skipped: {builder.name} + {verifier}: " + pairing_problem(
                verifier, builder.traits, f"the trees of builder {builder.name!r} are")
            for builder in builders for verifier in verifiers if verifier not in rules_for(builder)]
