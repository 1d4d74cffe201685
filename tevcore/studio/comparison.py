"""The verifier comparison's heavy work: every verifier's draws on one tree, sampled rounds drawn at one context
(of the toy target or of a real target), and the rules run over those rounds.

Each service checks its request against the server's caps, then works inside the participant's compute-queue
turn, stopping between verifiers or trees when the page is gone (`Seat.still_here`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from tevcore.engine.builder_specs import BuilderSpec
from tevcore.engine.flow import TargetFlow
from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree
from tevcore.lab.context_rounds import SampledRounds, rounds_at_context
from tevcore.lab.simulate import RoundsResult, SimulationResult, simulate, verify_rounds
from tevcore.proposer_protocol import Proposer
from tevcore.room import guarded
from tevcore.studio.toy_rounds import draw_toy_rounds
from tevcore.studio.turns import Seat, queue_turn
from tevcore.target.loading import Target
from tevcore.timing import median_seconds
from tevcore.verify.verifiers import get_verifier

LATENCY_REPEATS = 30  # timed decisions per verifier (their median is shown)


@dataclass
class VerifierDraws:
    """Each verifier's draws on the tree, the median seconds of one of its decisions, and why any failed."""

    results: dict[str, SimulationResult] = field(default_factory=dict)
    latencies: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def draw_verifiers(seat: Seat, names: Sequence[str], tree: DraftTree, node_logits: torch.Tensor, flow: TargetFlow,
                   temperature: float, draws: int, seed: int,
                   progress: Callable[[int, int, str], None] | None = None) -> VerifierDraws:
    """`draws` independent verifications of `tree` by each verifier in `names`, and the median time of one real
    decision given the round's `flow` (as the decoding loop calls it). One verifier failing does not hide the
    others; `progress(done, total, name)` follows each."""
    guarded.check_draws(seat.limits, draws)
    found = VerifierDraws()
    with queue_turn(seat):
        for done, name in enumerate(names, start=1):
            seat.still_here()
            try:
                found.results[name] = simulate(name, tree, node_logits, temperature, draws, seed)
                verify, generator = get_verifier(name), make_generator(seed)
                found.latencies[name] = median_seconds(
                    lambda: verify(tree, node_logits, temperature, generator, flow=flow), LATENCY_REPEATS,
                    node_logits.device)
            except Exception as err:  # shown per verifier
                found.failures[name] = f"{type(err).__name__}: {err}"
            if progress is not None:
                progress(done, len(names), name)
    return found


def toy_rounds(seat: Seat, builder: BuilderSpec, rounds: int, budget: int, temperature: float,
               seed: int) -> SampledRounds:
    """`rounds` fresh trees of `builder` at one context of the toy target (`tevcore.studio.toy_rounds`)."""
    guarded.check_toy_rounds(seat.limits, rounds, budget)
    with queue_turn(seat):
        return draw_toy_rounds(builder, rounds, budget, temperature, seed, between=seat.still_here)


def context_rounds(seat: Seat, target: Target, proposer: Proposer, context: Sequence[int], builder: BuilderSpec,
                   budget: int, temperature: float, rounds: int, seed: int,
                   progress: Callable[[int, int], None] | None = None) -> SampledRounds:
    """`rounds` fresh trees of `builder` drawn by `proposer` after `context`, each scored by `target` in one
    forward (`tevcore.lab.context_rounds`); every tree keeps full-vocabulary rows, hence the room's cap."""
    guarded.check_sampled(seat.limits, rounds, budget)

    def tree_done(done: int, total: int) -> None:
        seat.still_here()
        if progress is not None:
            progress(done, total)

    with queue_turn(seat):
        return rounds_at_context(target, proposer, context, builder, budget, temperature, rounds, seed,
                                 progress=tree_done)


def rules_over_rounds(seat: Seat, names: Sequence[str], sampled: SampledRounds, seed: int) -> dict[str, RoundsResult]:
    """Each rule once on every drawn round's tree (the same trees for every rule: a paired comparison)."""
    with queue_turn(seat):
        return verify_rounds(list(names), sampled.rounds, sampled.temperature, seed)
