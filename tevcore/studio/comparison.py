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
from tevcore.lab.context_rounds import SampledRounds, estimated_kept_bytes, rounds_at_context
from tevcore.lab.simulate import RoundsResult, SimulationResult, simulate
from tevcore.proposer_protocol import Proposer
from tevcore.room import guarded
from tevcore.studio.toy_rounds import TOY_DEPTH, TOY_VOCAB, draw_toy_rounds
from tevcore.studio.turns import Seat, queue_turn
from tevcore.target.loading import Target
from tevcore.timing import median_seconds
from tevcore.verify.registry import rules_for
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
    """`rounds` fresh trees of `builder` at one context of the toy target (`tevcore.studio.toy_rounds`); each
    keeps its rows (a dozen tokens wide)."""
    guarded.check_toy_rounds(seat.limits, rounds, budget)
    guarded.check_memory(seat.limits, estimated_kept_bytes(rounds, budget, TOY_VOCAB, TOY_DEPTH, keep_rows=True),
                         f"{rounds} toy trees of up to {budget} nodes")
    with queue_turn(seat):
        return draw_toy_rounds(builder, rounds, budget, temperature, seed, between=seat.still_here)


def context_rounds(seat: Seat, target: Target, proposer: Proposer, context: Sequence[int], builder: BuilderSpec,
                   budget: int, temperature: float, rounds: int, seed: int,
                   progress: Callable[[int, int], None] | None = None) -> SampledRounds:
    """`rounds` fresh trees of `builder` drawn by `proposer` after `context`, each scored by `target` in one
    forward (`tevcore.lab.context_rounds`). The trees let their full-vocabulary rows go once every applicable
    rule's verdicts at `seed` and the design ceilings are made (a later read scores a tree again, bit for bit),
    so what the session keeps is checked against the memory budget before the draw, and again as it goes (a
    drafter whose proposal rows depend on the path keeps a row per drawing node)."""
    guarded.check_sampled(seat.limits, rounds, budget)
    what = f"{rounds} trees of up to {budget} nodes"
    guarded.check_memory(seat.limits, estimated_kept_bytes(rounds, budget, target.vocab_size, proposer.depth,
                                                           keep_rows=False, rules=len(rules_for(builder))), what)

    def tree_done(done: int, total: int) -> None:
        seat.still_here()
        if progress is not None:
            progress(done, total)

    with queue_turn(seat):
        return rounds_at_context(target, proposer, context, builder, budget, temperature, rounds, seed,
                                 progress=tree_done, keep_rows=False,
                                 kept=lambda held: guarded.check_memory(seat.limits, held, what))


def rules_over_rounds(seat: Seat, names: Sequence[str], sampled: SampledRounds, seed: int) -> dict[str, RoundsResult]:
    """Each rule once on every drawn round's tree (the same trees for every rule: a paired comparison): the
    verdicts made at the draw when `seed` is the draw's, else the rules run on trees scored again
    (`SampledRounds.verify`), stopping between trees when the page is gone."""
    with queue_turn(seat):
        return sampled.verify(names, seed, between=seat.still_here)
