"""The ExitTrain page's drafter comparison: E per budget of the picked drafters, and two drafters paired at the same
round starts, each asked for in one typed request and computed in the participant's compute-queue turn.

The numbers come from the engine (`tevcore.train.eval`): `evaluate` for each drafter's own decode,
`paired_coverage` for two drafters at the same round starts, `prompts_for_se` for how many prompts a standard error
needs. A request is checked against the server's caps (`tevcore.room.guarded.check_compare`) before it waits in
line; this module only names the jobs and shapes the results. The models come from the page's loaders (the app
keeps one loaded copy per process), called inside the turn so loading waits its place too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tevcore.proposers.lookup import SUFFIX as LOOKUP_SUFFIX
from tevcore.room import guarded
from tevcore.room.limits import Limits
from tevcore.studio.turns import Seat, queue_turn
from tevcore.train import eval as train_eval
from tevcore.train.eval import PairedCell, prompts_for_se
from tevcore.train.eval_cli import paired_argv

# the drafter as trained, and as the explorer's default proposer runs it (drafter + context lookup)
VARIANTS = {"alone": "", "+ lookup": LOOKUP_SUFFIX}

LoadTarget = Callable[[], object]  # the page's cached target
LoadProposer = Callable[[str], object]  # a proposer spec -> the page's cached proposer


@dataclass(frozen=True)
class EvalRequest:
    """E per budget of each picked drafter folder in each variant (alone, + lookup): the real decoding loop, TEV.
    A budget is a positive number of nodes or "chain"."""

    drafters: tuple[str, ...]
    variants: tuple[str, ...]
    budgets: tuple[int | str, ...]
    per_set: int
    temperature: float
    max_new_tokens: int

    def __post_init__(self) -> None:
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"unknown proposer variant {unknown[0]!r} (known: {', '.join(VARIANTS)})")

    def check(self, limits: Limits) -> EvalRequest:
        """The request under the server's caps (a CapExceeded naming the first one it passes)."""
        guarded.check_compare(limits, list(self.budgets), self.per_set, self.max_new_tokens, len(self.drafters))
        return self

    def specs(self) -> list[tuple[str, str, str]]:
        """(drafter folder, variant, proposer spec) for every picked drafter in every chosen variant, in pick
        order."""
        return eval_specs(list(self.drafters), list(self.variants))


@dataclass
class DrafterEvaluation:
    """The rows an `EvalRequest` measured (one per drafter, variant and budget), what failed, and the request."""

    request: EvalRequest
    rows: pd.DataFrame
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PairedRequest:
    """Two drafters scored at every position of one decode (`eval-drafter --compare`): A the baseline, B the
    other, with or without the context lookup mixed into both."""

    baseline: str
    other: str
    budgets: tuple[int, ...]
    per_set: int
    temperature: float
    max_new_tokens: int
    lookup: bool

    def __post_init__(self) -> None:
        if any(not isinstance(b, int) or b < 1 for b in self.budgets) or not self.budgets:
            raise ValueError("budgets must be positive integers")
        if self.baseline == self.other:
            raise ValueError("A and B are the same drafter")

    def check(self, limits: Limits) -> PairedRequest:
        guarded.check_compare(limits, list(self.budgets), self.per_set, self.max_new_tokens, 2)
        return self

    def command(self) -> list[str]:
        """The `eval-drafter --compare` command that measures what this request measures (built by the command
        itself, from its own flags and default sets)."""
        return paired_command(self.baseline, self.other, list(self.budgets), self.per_set, self.temperature,
                              self.max_new_tokens, self.lookup)

    def sets(self) -> tuple[str, ...]:
        """The held-out prompt sets read at this temperature (the command's defaults)."""
        return train_eval.prompt_sets(self.temperature)


@dataclass
class PairedComparison:
    """The paired cells a `PairedRequest` measured (one per budget), and the request."""

    request: PairedRequest
    cells: list[PairedCell]

    def table(self, resolution: float) -> pd.DataFrame:
        """`paired_table` at the smallest gain worth resolving, a fraction of E(A)."""
        return paired_table(self.cells, resolution, len(self.request.sets()))


def evaluate_drafters(seat: Seat, request: EvalRequest, load_target: LoadTarget, load_proposer: LoadProposer,
                      progress: Callable[[int, int, str], None] | None = None) -> DrafterEvaluation:
    """Each (drafter, variant, budget) of `request` in turn, in the participant's queue turn; a drafter that fails
    (a damaged checkpoint) is reported in `errors` and the others still run. `progress(done, total, what)`."""
    request.check(seat.limits)
    rows, errors = [], []
    with queue_turn(seat):
        try:
            target = load_target()
            prompts = train_eval.eval_prompts(train_eval.MIX, request.per_set)
        except (ValueError, OSError) as err:  # a missing model or prompt file
            return DrafterEvaluation(request, pd.DataFrame(), [f"Could not prepare the evaluation: {err}"])
        jobs = [(job, budget) for job in request.specs() for budget in request.budgets]
        for done, ((path, variant, spec), budget) in enumerate(jobs, start=1):
            seat.still_here()
            try:
                cell = train_eval.evaluate(target, load_proposer(spec), prompts, request.temperature, [budget],
                                           request.max_new_tokens, 0, progress=False)[0]
                rows.append({"checkpoint": path, "proposer": variant, "budget": budget if budget != "chain" else 1,
                             "budget label": str(budget), "E": cell.expected_length,
                             "E s.e.": cell.expected_length_se, "mean L": cell.mean_emitted, "rounds": cell.rounds})
            except Exception as err:  # a damaged checkpoint is reported, the others still run
                errors.append(f"{path} {variant} ({type(err).__name__}): {err}")
            if progress is not None:
                progress(done, len(jobs), f"{Path(path).name} {variant}, budget {budget}")
    return DrafterEvaluation(request, pd.DataFrame(rows), errors)


def compare_paired(seat: Seat, request: PairedRequest, load_target: LoadTarget,
                   load_proposer: LoadProposer) -> PairedComparison:
    """One decode, both drafters scored at every position, in the participant's queue turn. A damaged drafter or a
    missing prompt set raises (the page says it in one line)."""
    request.check(seat.limits)
    suffix = VARIANTS["+ lookup"] if request.lookup else ""
    with queue_turn(seat):
        target = load_target()
        proposers = [load_proposer(drafter + suffix) for drafter in (request.baseline, request.other)]
        seat.still_here()
        cells = train_eval.paired_coverage(target, *proposers,
                                           train_eval.eval_prompts(request.sets(), request.per_set),
                                           request.temperature, list(request.budgets), request.max_new_tokens, 0,
                                           progress=False)
    return PairedComparison(request, cells)


def eval_specs(picks: list[str], variants: list[str]) -> list[tuple[str, str, str]]:
    """(drafter folder, variant, proposer spec) for every picked drafter in every chosen variant, in pick order."""
    return [(path, variant, path + VARIANTS[variant]) for path in picks for variant in variants]


def paired_command(baseline: str, other: str, budgets: list[int], per_set: int, temperature: float,
                   max_new_tokens: int, lookup: bool) -> list[str]:
    """The `eval-drafter --compare` command that measures what the page's paired comparison measures (built by
    the command itself, from its own flags and default sets)."""
    return paired_argv(baseline, other, budgets, per_set, temperature, max_new_tokens, lookup)


def paired_table(cells: list[PairedCell], resolution: float, sets: int) -> pd.DataFrame:
    """One row per budget: both E, B - A with its s.e., and the prompts per set a meaningful s.e. needs.

    `resolution` is the smallest difference worth seeing, as a fraction of E(A); a difference of that size
    stands out at two standard errors when s.e. <= resolution * E(A) / 2. The second count is for the
    measured difference itself (s.e. <= |B - A| / 2). Both scale the measured per-prompt spread
    (`prompts_for_se`) and are split over the `sets` held-out sets.
    """
    def per_set(cell: PairedCell, wanted: float) -> int | None:
        total = prompts_for_se(cell, wanted)
        return None if total is None else -(-total // sets)

    rows = []
    for c in cells:
        rows.append({"budget": c.budget, "prompts": c.prompts, "positions": c.positions,
                     "E(A)": c.baseline_length, "E(B)": c.other_length, "B - A": c.difference,
                     "B - A %": 100 * c.difference / c.baseline_length, "s.e. %": 100 * c.difference_se / c.baseline_length,
                     "prompts per set for s.e. ≤ δ/2": per_set(c, resolution * c.baseline_length / 2),
                     "prompts per set to resolve B - A": per_set(c, abs(c.difference) / 2)})
    return pd.DataFrame(rows)
