"""The verifier comparison's heavy work: a tree's exit law, every verifier's draws on that tree, sampled rounds
drawn at one context (of the toy target or of a real target), the rules run over those rounds, and the result files
of the measuring commands.

A page asks with a typed request (`DrawRequest`, `RoundsRequest`), checked once against the server's `Limits`
before anything waits; the work is done inside the participant's compute-queue turn, stopping between verifiers or
trees when the page is gone (`Seat.still_here`). The answers are typed too (`VerifierComparison`,
`AcrossRounds`, `ResultFiles`) and carry what the page draws, so a page only renders.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from tevcore.engine.builder_specs import BuilderSpec, parse_builder
from tevcore.engine.sampling import MAX_SEED, make_generator
from tevcore.engine.tree import DraftTree
from tevcore.lab.context_rounds import SampledRounds, estimated_kept_bytes, rounds_at_context
from tevcore.lab.simulate import TOO_FEW_ROUNDS, RoundsResult, SimulationResult, simulate
from tevcore.proposer_protocol import Proposer
from tevcore.results import ResultRecord, read_result
from tevcore.room import guarded
from tevcore.room.limits import Limits
from tevcore.studio import reader
from tevcore.studio.toy_rounds import TOY_DEPTH, TOY_VOCAB, draw_toy_rounds
from tevcore.studio.turns import Seat, queue_turn
from tevcore.target.loading import Target
from tevcore.timing import median_seconds
from tevcore.verify.laws import VerdictLaw, bonus_pvalue, exit_law, exit_pvalue
from tevcore.verify.registry import RULES, rule_law, rules_for
from tevcore.verify.verifiers import get_verifier

__all__ = ["TOO_FEW_ROUNDS", "SampledRounds", "MAX_TEMPERATURE", "LATENCY_REPEATS", "DrawRequest", "RoundsRequest",
           "VerifierDraws", "VerifierComparison", "BonusAtExit", "AcrossRounds", "ResultFiles", "study_tree",
           "compare_verifiers", "bonus_at_exit", "toy_rounds", "context_rounds", "picked_round", "across_rounds",
           "read_result_files", "folder_listing"]

MAX_TEMPERATURE = 5.0  # the highest temperature a comparison studies
LATENCY_REPEATS = 30  # timed decisions per verifier (their median is shown)


@dataclass
class VerifierDraws:
    """Each verifier's draws on the tree, the median seconds of one of its decisions, and why any failed."""

    results: dict[str, SimulationResult] = field(default_factory=dict)
    latencies: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def _check_seed(seed: int) -> None:
    if not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"the seed must lie in [0, {MAX_SEED}], got {seed}")


def _check_temperature(temperature: float) -> None:
    if not 0.0 <= float(temperature) <= MAX_TEMPERATURE:
        raise ValueError(f"the temperature must lie in [0, {MAX_TEMPERATURE:g}], got {temperature:g}")


@dataclass(frozen=True)
class DrawRequest:
    """Which verifiers draw on one tree, at which temperature, how many draws each, from which seed."""

    names: tuple[str, ...]
    temperature: float
    draws: int
    seed: int

    def check(self, limits: Limits) -> None:
        """Refuse a request past the server's draw cap, an unknown rule, a seed or temperature out of range."""
        guarded.check_draws(limits, self.draws)
        _check_seed(self.seed)
        _check_temperature(self.temperature)
        unknown = [name for name in self.names if name not in RULES]
        if unknown:
            raise ValueError(f"no such verifier: {', '.join(unknown)}")


@dataclass(frozen=True)
class VerifierComparison:
    """What one run of the comparison found on one tree: the exit law X there, each verifier's draws, the law each
    is tested against (its own if exact, X for the foil) and its chi-square p-values against that law."""

    request: DrawRequest
    law: VerdictLaw
    draws: VerifierDraws
    own_laws: dict[str, VerdictLaw]
    exit_p: dict[str, float]
    bonus_p: dict[str, float]

    @property
    def results(self) -> dict[str, SimulationResult]:
        return self.draws.results


@dataclass(frozen=True)
class BonusAtExit:
    """The bonus law at one exit node and each verifier's draws there: how many exits, its p-value against its own
    law there, and (for the rules held to X) its empirical bonus shares over the vocabulary."""

    law: np.ndarray
    exits: dict[str, int]
    pvalues: dict[str, float]
    shares: dict[str, np.ndarray]


def study_tree(seat: Seat, tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> VerdictLaw:
    """The exit law X of `tree` with its target rows at `temperature` (the flow and 1 + C with it); a ValueError
    when the tree and its rows do not fit."""
    _check_temperature(temperature)
    with queue_turn(seat):
        return exit_law(tree, node_logits, temperature)


def compare_verifiers(seat: Seat, request: DrawRequest, tree: DraftTree, node_logits: torch.Tensor,
                      progress: Callable[[int, int, str], None] | None = None) -> VerifierComparison:
    """`request.draws` independent verifications of `tree` by each verifier, the median time of one real decision
    given the round's flow (as the decoding loop calls it), and each verifier's p-values against its law. One
    verifier failing does not hide the others; `progress(done, total, name)` follows each."""
    request.check(seat.limits)
    found = VerifierDraws()
    with queue_turn(seat):
        law = exit_law(tree, node_logits, request.temperature)
        for done, name in enumerate(request.names, start=1):
            seat.still_here()
            try:
                found.results[name] = simulate(name, tree, node_logits, request.temperature, request.draws,
                                               request.seed)
                verify, generator = get_verifier(name), make_generator(request.seed)
                found.latencies[name] = median_seconds(
                    lambda: verify(tree, node_logits, request.temperature, generator, flow=law.flow),
                    LATENCY_REPEATS, node_logits.device)
            except Exception as err:  # shown per verifier
                found.failures[name] = f"{type(err).__name__}: {err}"
            if progress is not None:
                progress(done, len(request.names), name)
        own = {name: rule_law(name, tree, node_logits, request.temperature) for name in found.results}
        exit_p = {name: exit_pvalue(r.exit_counts, own[name]) for name, r in found.results.items()}
        bonus_p = {name: bonus_pvalue(r.bonus_counts, own[name]) for name, r in found.results.items()}
    return VerifierComparison(request, law, found, own, exit_p, bonus_p)


def bonus_at_exit(found: VerifierComparison, node: int) -> BonusAtExit:
    """The bonus law at exit `node` and each verifier's draws there (light: one row per verifier)."""
    law = found.law.bonus_probs(node).numpy()
    exits, pvalues, shares = {}, {}, {}
    for name, result in found.results.items():
        if node not in result.bonus_counts:
            continue
        exits[name] = int(result.bonus_counts[node][1].sum())
        pvalues[name] = bonus_pvalue(result.bonus_counts, found.own_laws[name], nodes=[node])
        shares[name] = result.bonus_shares(node, law.shape[0]).numpy()
    return BonusAtExit(law, exits, pvalues, shares)


@dataclass(frozen=True)
class RoundsRequest:
    """Fresh sampled trees at one context: the builder's spec as typed, its budget, the temperature the trees are
    drawn at, how many and from which seed (the key of the trees drawn; `toy_rounds` and `context_rounds` hold the
    count and budget to the server's caps)."""

    builder: str
    budget: int
    temperature: float
    rounds: int
    seed: int

    def spec(self) -> BuilderSpec:
        """The builder parsed at the budget; a ValueError in one line for a spec that is not one."""
        return parse_builder(self.builder.strip(), self.budget)


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


def picked_round(seat: Seat, sampled: SampledRounds, index: int) -> tuple[DraftTree, torch.Tensor]:
    """Round `index`'s tree and its target rows: rounds that let their rows go score the tree again (one forward
    over the rounds' context, checked bit for bit against the draw), so that read takes a queue turn; a round whose
    rows are held (the first, right after the draw) is read without one, so a participant sees their trees when
    their draw ends, not after everyone queued behind it."""
    if sampled.at_hand(index):
        return sampled.rounds[index]
    with queue_turn(seat):
        return sampled.rounds[index]


@dataclass(frozen=True)
class AcrossRounds:
    """Every chosen rule once on every drawn round's tree (the same trees for each: a paired comparison), and
    each design against its own ceiling per depth (`tevcore.lab.ceilings`)."""

    names: tuple[str, ...]
    seed: int
    results: dict[str, RoundsResult]
    ceilings: dict[str, list[dict]]

    def unknown_gaps(self) -> list[str]:
        """The rules whose gap has no standard error (every round ended with the same block length)."""
        return [name for name, result in self.results.items() if math.isnan(result.length_gap()[1])]


def across_rounds(seat: Seat, names: Sequence[str], sampled: SampledRounds, seed: int) -> AcrossRounds:
    """Each rule once on every drawn round's tree, and the designs' ceilings on those rounds: the verdicts made at
    the draw when `seed` is the draw's, else the rules run on trees scored again (`SampledRounds.verify`),
    stopping between trees when the page is gone."""
    _check_seed(seed)
    with queue_turn(seat):
        results = sampled.verify(names, seed, between=seat.still_here)
        seat.still_here()
        return AcrossRounds(tuple(names), int(seed), results, sampled.design_ceilings())


@dataclass(frozen=True)
class ResultFiles:
    """The result records read, by file name, and why each file that is not one was refused: an uploaded file by
    its name, a file of the folder by its path."""

    records: dict[str, ResultRecord]
    refused_uploads: dict[str, str]
    refused_files: dict[str, str]


def folder_listing(folder: Path | None) -> tuple[tuple[str, float, int], ...]:
    """The .json files of `folder` with their times and sizes (light: what tells the page to read them again)."""
    if folder is None or not folder.is_dir():
        return ()
    return tuple((str(path), path.stat().st_mtime, path.stat().st_size) for path in sorted(folder.glob("*.json")))


def read_result_files(seat: Seat, uploads: Sequence[reader.Upload], folder: Path | None) -> ResultFiles:
    """The result records of the uploaded files and of every .json in `folder` (each held to the server's byte cap
    by the studio's reader), read in a queue turn; a file that is not one is named with why."""
    found = ResultFiles({}, {}, {})
    with queue_turn(seat):
        for upload in uploads:
            try:
                found.records[upload.name] = read_result(upload.data, upload.name)
            except ValueError as err:
                found.refused_uploads[upload.name] = str(err)
        for path, _, _ in folder_listing(folder):
            seat.still_here()
            try:
                found.records[Path(path).name] = read_result(reader.read_file(seat.limits, path, path).data, path)
            except (ValueError, OSError) as err:
                found.refused_files[path] = str(err)
    return found
