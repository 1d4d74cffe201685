"""The exit-law workshop's heavy work: the coupling demonstration's rounds, in a compute-queue turn.

At depth 1 a fixed node (the drafter's argmax) verified by TEV is set against a fresh node drawn from q in every
round, verified by rrs; the laws come from the page's table, the rates from the engine's builders and verifiers.
"""

from __future__ import annotations

import torch

from tevcore.engine.builder_specs import BUILDER_FAMILIES
from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree
from tevcore.lab.simulate import simulate, verify_rounds
from tevcore.room import guarded
from tevcore.studio.turns import Seat, queue_turn


def coupling_rounds(seat: Seat, fixed_tree: DraftTree, p: torch.Tensor, q: torch.Tensor, rounds: int,
                    seed: int) -> dict[str, tuple[float, float]]:
    """Empirical acceptance and its standard error over `rounds` rounds (L = 1 + accepted): the one-node
    `fixed_tree` verified by TEV against the target row `p` (the tree never changes: `simulate`'s batched draws),
    and a fresh one-node tree drawn from `q` by the sampled builder (sampled:1) in every round, verified by rrs."""
    guarded.check_coupling(seat.limits, rounds)
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
