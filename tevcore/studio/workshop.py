"""The exit-law workshop's work: a hand-made tree's flow and laws, its two verifiers' walks under one seed, the
coupling preset's laws and its rounds, and the mixed node tried in both orders, each in a compute-queue turn.

The tables are read by `tevcore.studio.workshop_tables` and `tevcore.studio.coupling`; every number comes from the
engine's flow, laws, builders and verifiers. At depth 1 the coupling's fixed node (the drafter's argmax) verified
by TEV is set against a fresh node drawn from q in every round, verified by rrs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from tevcore.engine.builder_specs import BUILDER_FAMILIES
from tevcore.engine.flow import TargetFlow, target_flow
from tevcore.engine.sampling import MAX_SEED, make_generator
from tevcore.engine.tree import DraftTree
from tevcore.lab.simulate import simulate, verify_rounds
from tevcore.room import guarded
from tevcore.studio.coupling import Coupling, coupling
from tevcore.studio.turns import Seat, queue_turn
from tevcore.studio.workshop_tables import TwoOrders, WorkshopTree, two_orders, workshop_tree
from tevcore.verify.laws import exit_law
from tevcore.verify.verifiers import Verdict, get_verifier


def _check_seed(seed: int) -> None:
    if not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"the seed must lie in [0, {MAX_SEED}], got {seed}")


@dataclass(frozen=True)
class TreeLesson:
    """A hand-made tree as the workshop shows it: the tree read from the table, its target flow at T = 1, and the
    bonus law at every node (a row over the table's small vocabulary each)."""

    table: WorkshopTree
    flow: TargetFlow
    bonus: torch.Tensor  # (nodes, vocabulary)


@dataclass(frozen=True)
class Walks:
    """Predraw-and-follow and TEV on the lesson's tree, each from a generator seeded with `seed`."""

    seed: int
    predraw: Verdict
    tev: Verdict


def explain_tree(seat: Seat, table: pd.DataFrame) -> TreeLesson:
    """The edited table as a tree with its flow and bonus laws; a ValueError in plain words for a table that does
    not describe one."""
    with queue_turn(seat):
        tree = workshop_tree(table)
        flow = target_flow(tree.tree, tree.node_logits, 1.0)
        law = exit_law(tree.tree, tree.node_logits, 1.0)
        bonus = torch.stack([law.bonus_probs(node) for node in range(tree.tree.num_nodes)])
    return TreeLesson(tree, flow, bonus)


def walk_tree(seat: Seat, lesson: TreeLesson, seed: int) -> Walks:
    """Both verifiers' verdicts on the lesson's tree under one seed; a verifier's refusal is raised as it is."""
    _check_seed(seed)
    with queue_turn(seat):
        tree, logits = lesson.table.tree, lesson.table.node_logits
        return Walks(int(seed), get_verifier("predraw")(tree, logits, 1.0, make_generator(seed)),
                     get_verifier("tev")(tree, logits, 1.0, make_generator(seed)))


def explain_coupling(seat: Seat, table: pd.DataFrame) -> Coupling:
    """The edited p and q table with both depth-1 laws (`tevcore.studio.coupling`); a ValueError in plain words."""
    with queue_turn(seat):
        return coupling(table)


def explain_orders(seat: Seat, found: Coupling, seed: int) -> TwoOrders:
    """The mixed node of the table's p and q under both orders, its sibling drawn with `seed`
    (`tevcore.studio.workshop_tables.two_orders`); a ValueError when q leaves no sibling to draw."""
    _check_seed(seed)
    with queue_turn(seat):
        return two_orders(found.p, found.q, found.vocab, seed)


def coupling_rounds(seat: Seat, fixed_tree: DraftTree, p: torch.Tensor, q: torch.Tensor, rounds: int,
                    seed: int) -> dict[str, tuple[float, float]]:
    """Empirical acceptance and its standard error over `rounds` rounds (L = 1 + accepted): the one-node
    `fixed_tree` verified by TEV against the target row `p` (the tree never changes: `simulate`'s batched draws),
    and a fresh one-node tree drawn from `q` by the sampled builder (sampled:1) in every round, verified by rrs."""
    guarded.check_coupling(seat.limits, rounds)
    _check_seed(seed)
    logits = p.log().expand(2, -1).clone()  # the root's row and the node's (which only feeds its bonus)
    with queue_turn(seat):
        generator = make_generator(seed)
        build = BUILDER_FAMILIES["sampled"].spec((1,))
        draws = [(build(0, q.log().unsqueeze(0), None, 1.0, generator), logits) for _ in range(int(rounds))]
        seat.still_here()
        fixed = simulate("tev", fixed_tree, logits, 1.0, int(rounds), seed)
        sampled_mean, sampled_se = verify_rounds(["rrs"], draws, 1.0, seed)["rrs"].mean_emitted()
    return {"fixed guess + TEV": (fixed.mean_emitted - 1.0, fixed.emitted_stderr),
            "sampled draw + rrs": (sampled_mean - 1.0, sampled_se)}
