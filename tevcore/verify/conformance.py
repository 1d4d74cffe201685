"""The conformance suite: any verifier with the reference signature (`reference.py`) against the target law.

Each case decodes a synthetic target (`synthetic.py`) with tevcore's own
builders drawing the trees, hands every round to the verifier under test as
plain tensors, continues from the tokens it emits, and compares the law of
the first `horizon` emitted strings with the target's exact law by the one
chi-square (`laws.chi_square`), pass when its p-value is above `ALPHA`.
Two groups:

- "enumerated": a 5- or 6-token vocabulary, 2-token strings over several
  rounds. The expected law is enumerated over every string exactly (no
  unknown mass), fixed, sampled (i.i.d. and without replacement), mixed and
  sampled-chain trees, T = 0.7, 1 and 0 (where one wrong string fails).
- "large N": a 64-token vocabulary at T = 1 with top-k 20 and top-p 0.9 on,
  the first emitted token of 4,000 rounds against the warped target row:
  what a wrong logits slice, a residual bug, an argmax, or warpers on the
  wrong side would move.

The verifier itself is sampled (a black box's randomness cannot be
enumerated); only the expected laws are exact. A verifier that declares
`conformance_trees` (tree kinds among `reference.TREE_KINDS`) runs the cases
of those trees only. The rows a drawn tree is drawn from are warped as the
target is, as an engine's drafter samples under the request's top-k / top-p.
The suite runs on one torch thread (its tensors are tiny); its default run
takes about half a minute on a laptop core.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.draft_rows import as_draft_rows
from tevcore.engine.sampling import make_generator, warp_logits
from tevcore.engine.tree import DraftTree
from tevcore.verify.laws import chi_square, chi_square_pvalue
from tevcore.verify.reference import TREE_KINDS
from tevcore.verify.synthetic import draft_rows, seeded_logits, strings_law

ALPHA = 1e-4  # a case fails below this p-value (about one false failure per 10,000 cases run on an exact rule)
START = (1, 2)


@dataclass(frozen=True)
class Case:
    """One conformance case: a synthetic target, a builder's trees, a temperature and warpers, a sample size."""

    name: str
    group: str
    trees: str  # one of reference.TREE_KINDS
    builder: str
    vocab: int
    temperature: float
    strings: int
    horizon: int = 2
    top_k: int | None = None
    top_p: float | None = None
    budget: int | None = None
    depth: int = 3
    scale: float = 2.0  # target logit scale: larger is peakier
    noise: float = 2.0  # scale of the draft's noise on the target's rows: smaller drafts closer to the target


CASES = (
    Case("fixed best-first tree, T=1", "enumerated", "fixed", "best_first", 5, 1.0, 1500, budget=6),
    Case("fixed width-3,2 tree, T=0.7", "enumerated", "fixed", "width:3,2", 5, 0.7, 1500),
    Case("sampled tree (i.i.d. 3,2), T=1", "enumerated", "sampled", "sampled:3,2", 5, 1.0, 1500),
    Case("sampled tree (without replacement 2,2), T=0.7", "enumerated", "sampled", "sampled-wor:2,2", 5, 0.7, 1500),
    Case("mixed tree (top-1 fixed, 3,2), T=1", "enumerated", "mixed", "mixed:3,2", 5, 1.0, 1500),
    Case("sampled chain (1,1,1), T=1", "enumerated", "sampled chain", "sampled:1,1,1", 5, 1.0, 1500),
    Case("fixed width-3,2 tree with top-k 4, top-p 0.9, T=1", "enumerated", "fixed", "width:3,2", 6, 1.0, 1500,
         top_k=4, top_p=0.9),
    Case("fixed best-first tree, T=0 (greedy)", "enumerated", "fixed", "best_first", 5, 0.0, 300, budget=6),
    Case("mixed tree, T=0 (greedy)", "enumerated", "mixed", "mixed:2,2", 5, 0.0, 300),
    Case("fixed best-first tree, V=64, T=1, top-k 20, top-p 0.9", "large N", "fixed", "best_first", 64, 1.0, 4000,
         horizon=1, top_k=20, top_p=0.9, budget=10, scale=1.5, noise=0.5),
    Case("sampled tree (i.i.d. 4,2), V=64, T=1, top-k 20, top-p 0.9", "large N", "sampled", "sampled:4,2", 64, 1.0,
         4000, horizon=1, top_k=20, top_p=0.9, scale=1.5, noise=0.5),
    Case("mixed tree (4,2), V=64, T=1, top-k 20, top-p 0.9", "large N", "mixed", "mixed:4,2", 64, 1.0, 4000,
         horizon=1, top_k=20, top_p=0.9, scale=1.5, noise=0.5),
)


@dataclass(frozen=True)
class CaseResult:
    """A case's verdict: passed or not, its p-value and statistic, or what went wrong."""

    case: Case
    passed: bool
    pvalue: float
    statistic: float
    dof: int
    problem: str = ""  # why it failed without a p-value (an exception, a malformed verdict)

    def line(self) -> str:
        """One printed line per case: PASS or FAIL, its name, the evidence."""
        status = "PASS" if self.passed else "FAIL"
        if self.problem:
            return f"{status}  {self.case.name}: {self.problem}"
        return (f"{status}  {self.case.name}: chi2 {self.statistic:.1f} on {self.dof} dof, p = {self.pvalue:.3g} "
                f"({self.case.strings} strings of {self.case.horizon} token(s))")


class _Synthetic:
    """A case's target and drafter rows (cached per context) and its trees as plain tensors."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.build = parse_builder(case.builder, case.budget)
        self.target = lru_cache(maxsize=None)(self._target)
        self._fixed: dict[tuple[int, ...], tuple[DraftTree, dict]] = {}  # a fixed tree depends on its context only

    def _target(self, context: tuple[int, ...]) -> torch.Tensor:
        return seeded_logits("conformance target", context, vocab=self.case.vocab, scale=self.case.scale)

    def rows(self, context: tuple[int, ...]) -> torch.Tensor:
        case = self.case
        rows = draft_rows(self.target, lambda start, d: seeded_logits("conformance draft", start, d,
                                                                       vocab=case.vocab, scale=case.noise),
                          context, case.depth)
        return rows if case.trees == "fixed" else warp_logits(rows, case.temperature, case.top_k, case.top_p)

    def node_logits(self, context: tuple[int, ...], tree: DraftTree) -> torch.Tensor:
        tokens = tree.tokens.tolist()
        return torch.stack([self.target(context + tuple(tokens[u] for u in tree.path(v)[1:]))
                            for v in range(tree.num_nodes)])

    def round(self, context: tuple[int, ...], generator: torch.Generator) -> tuple[DraftTree, dict]:
        """A fresh tree at `context` and the verifier's plain keyword arguments for it (logits included)."""
        case = self.case
        if context in self._fixed:  # copied: a verifier that writes into its inputs spoils no later round
            tree, arguments = self._fixed[context]
            return tree, {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in arguments.items()}
        tree = self.build(context[-1], as_draft_rows(self.rows(context)), case.budget, case.temperature, generator)
        arguments = dict(logits=self.node_logits(context, tree), parents=tree.parents.clone(),
                         tokens=tree.tokens.clone(), temperature=case.temperature, top_k=case.top_k, top_p=case.top_p)
        if tree.draws is not None:
            draws = tree.draws
            proposals = torch.zeros(tree.num_nodes, case.vocab, dtype=torch.float64)
            drew = draws.row_of >= 0
            proposals[drew] = draws.rows[draws.row_of[drew]]
            arguments.update(draw_parents=draws.parents.clone(), draw_children=draws.children.clone(),
                             draw_fixed=draws.fixed.clone(), proposals=proposals, draw_mode=draws.mode)
        elif case.trees == "fixed":
            self._fixed[context] = tree, {k: v.clone() if isinstance(v, torch.Tensor) else v
                                          for k, v in arguments.items()}
        return tree, arguments


def _malformed(tree: DraftTree, vocab: int, verdict: object) -> str:
    """What is wrong with a verdict's shape ('' if nothing): a (path, bonus) pair, path a root path of the tree."""
    try:
        path, bonus = verdict
        path = [int(node) for node in path]
        bonus = int(bonus)
    except (TypeError, ValueError):
        return f"returned {verdict!r}, not (path, bonus)"
    if not path or path[0] != 0 or any(not 0 <= node < tree.num_nodes for node in path) \
            or tree.path(path[-1]) != path:
        return f"returned the path {path}, not a root path of the tree (parents {tree.parents.tolist()})"
    if not 0 <= bonus < vocab:
        return f"returned the bonus token {bonus}, outside the vocabulary of {vocab}"
    return ""


def run_case(case: Case, verify: Callable, seed: int = 0, scale: float = 1.0) -> CaseResult:
    """Decode `case.strings * scale` strings of the case through `verify` and test their law."""
    synthetic = _Synthetic(case)
    trees, verdicts = make_generator(seed), make_generator(seed + 1)
    strings = max(1, int(case.strings * scale))
    counts = np.zeros(case.vocab ** case.horizon)
    for _ in range(strings):
        context = START
        while len(context) - len(START) < case.horizon:
            tree, arguments = synthetic.round(context, trees)
            try:
                verdict = verify(generator=verdicts, **arguments)
            except Exception as err:  # noqa: BLE001 - the verifier under test may fail any way; the case reports it
                return CaseResult(case, False, 0.0, float("inf"), 0,
                                  f"the verifier raised {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            problem = _malformed(tree, case.vocab, verdict)
            if problem:
                return CaseResult(case, False, 0.0, float("inf"), 0, problem)
            path, bonus = verdict
            context = context + tuple(int(tree.tokens[int(node)]) for node in list(path)[1:]) + (int(bonus),)
        counts[int(np.ravel_multi_index(context[len(START):len(START) + case.horizon], (case.vocab,) * case.horizon))] += 1
    law = strings_law(synthetic.target, case.vocab, START, case.horizon, case.temperature, case.top_k, case.top_p)
    expected = np.array([law[s] for s in itertools.product(range(case.vocab), repeat=case.horizon)])
    statistic, dof = chi_square(counts, expected)
    pvalue = chi_square_pvalue(statistic, dof)
    return CaseResult(case, pvalue > ALPHA, pvalue, statistic, dof)


def cases_for(verify: Callable, names: list[str] | None = None) -> list[Case]:
    """The cases a verifier runs: those of the tree kinds it declares (`conformance_trees`, default all), or the
    named ones; a ValueError for an unknown name or a tree kind the suite does not hold."""
    kinds = tuple(getattr(verify, "conformance_trees", TREE_KINDS))
    unknown_kinds = sorted(set(kinds) - set(TREE_KINDS))
    if unknown_kinds:
        raise ValueError(f"conformance_trees {unknown_kinds} are not tree kinds of the suite: {', '.join(TREE_KINDS)}")
    chosen = [case for case in CASES if case.trees in kinds]
    if names:
        by_name = {case.name: case for case in CASES}
        missing = [name for name in names if name not in by_name]
        if missing:
            raise ValueError(f"no conformance case named {missing[0]!r}; see --list")
        chosen = [case for case in chosen if case.name in names]
    return chosen


def run_suite(verify: Callable, names: list[str] | None = None, seed: int = 0, scale: float = 1.0,
              report: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """Every case `cases_for` picks, in order; `report` sees each result as it comes."""
    results = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a thread pool only adds its synchronisation
    try:
        for case in cases_for(verify, names):
            result = run_case(case, verify, seed, scale)
            if report is not None:
                report(result)
            results.append(result)
    finally:
        torch.set_num_threads(threads)
    return results
