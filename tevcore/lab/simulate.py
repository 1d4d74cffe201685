"""Many verifications of one scored tree at once, by the shipped rules.

`simulate` runs n independent verdicts of the same tree through
`verifiers.draw`: the very rule a decoding round runs with n = 1, here with
n = 1e5, and the shared bonus draw per exit node. It returns the counts the
laws (`tevcore.verify.laws`) are tested against.

`verify_rounds` is the other direction: one verdict per round over many
rounds (fresh draws of a sampled tree, say), as a decoding run sees them,
with each round's yardstick 1 + C beside its block length. A proposal-ratio
rule is exact only over the tree's draws, so only such a sample of trees
shows it: its first emitted tokens follow the target's row, and its mean L
may differ from the mean 1 + C.

Which rules have the gap E[L] - E[1 + C] = 0 in expectation: exactly those
the registry calls optimal at the rounds' temperature (tev, predraw, residual;
greedy at T = 0 only), whose exit law given every tree is X, so that
E[L | tree] = 1 + C(tree). The chain-only rule (its own law) falls at or below
1 + C; greedy at T > 0 and the naive ratio foil follow other laws; rrs and
block, exact only over the tree's draw, may exceed it. The gap's standard
error is never a bare 0 from rounds that all ended alike: see
`RoundsResult.length_gap`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree
from tevcore.timing import seconds_of
from tevcore.verify.laws import OPTIMAL, chi_square, chi_square_pvalue
from tevcore.verify.registry import standing
from tevcore.verify.scored import scored_round
from tevcore.verify.verifiers import draw, get_rule, get_verifier

BonusCounts = dict[int, tuple[torch.Tensor, torch.Tensor]]  # exit node -> (token ids, counts)
TOO_FEW_ROUNDS = "too few rounds"  # what a gap's NaN standard error means (see `RoundsResult.length_gap`)


def gap_text(gap: float, stderr: float) -> str:
    """A gap and its standard error as shown: '+0.120 ± 0.034', or the gap and 'too few rounds' when no honest
    standard error exists."""
    return f"{gap:+.3f} ({TOO_FEW_ROUNDS})" if math.isnan(stderr) else f"{gap:+.3f} ± {stderr:.3f}"


@dataclass(frozen=True)
class SimulationResult:
    """Counts from n independent verifications of one tree."""

    verifier: str
    temperature: float
    n: int
    exit_counts: torch.Tensor  # (N+1,) draws that exited at each node
    length_counts: torch.Tensor  # (max_depth+2,) draws per block length L = depth(exit) + 1
    bonus_counts: BonusCounts
    seconds: float

    def exit_shares(self) -> torch.Tensor:
        """(N+1,) share of the draws that exited at each node."""
        return self.exit_counts.double() / self.n

    def length_shares(self) -> torch.Tensor:
        """(max_depth+2,) share of the draws per block length L."""
        return self.length_counts.double() / self.n

    def bonus_shares(self, node: int, vocab: int) -> torch.Tensor | None:
        """(vocab,) share of each token among the bonuses of the draws that exited at `node`; None when none did."""
        if node not in self.bonus_counts:
            return None
        tokens, counts = self.bonus_counts[node]
        shares = torch.zeros(vocab, dtype=torch.float64).index_add_(0, tokens, counts.double())
        return shares / shares.sum()

    @property
    def mean_emitted(self) -> float:
        lengths = torch.arange(self.length_counts.numel(), dtype=torch.float64)
        return float((lengths * self.length_counts).sum()) / self.n

    @property
    def emitted_stderr(self) -> float:
        """Standard error of `mean_emitted`."""
        lengths = torch.arange(self.length_counts.numel(), dtype=torch.float64)
        second = float((lengths.square() * self.length_counts).sum()) / self.n
        return math.sqrt(max(second - self.mean_emitted ** 2, 0.0) / self.n)


def count_verdicts(name: str, tree: DraftTree, exits: torch.Tensor, bonus: torch.Tensor,
                   seconds: float = 0.0, temperature: float = float("nan")) -> SimulationResult:
    """Exit, length and bonus-given-exit counts of verdicts (exit node and bonus token per draw)."""
    exits, bonus = exits.cpu(), bonus.cpu()
    exit_counts = torch.bincount(exits, minlength=tree.num_nodes)
    length_counts = torch.zeros(tree.max_depth + 2, dtype=torch.long).index_add_(0, tree.depths + 1, exit_counts)
    bonus_counts: BonusCounts = {}
    for node in torch.nonzero(exit_counts).flatten().tolist():
        bonus_counts[node] = torch.unique(bonus[exits == node], return_counts=True)
    return SimulationResult(name, temperature, int(exits.numel()), exit_counts, length_counts, bonus_counts, seconds)


def simulate(name: str, tree: DraftTree, node_logits: torch.Tensor, temperature: float,
             n: int, seed: int) -> SimulationResult:
    """n independent verifications of `tree` by verifier `name` (its shipped rule, batched)."""
    rule = get_rule(name)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    generator = make_generator(seed, node_logits.device)
    round_ = scored_round(tree, node_logits, temperature)
    (exits, bonus), seconds = seconds_of(lambda: draw(rule, round_, generator, int(n)), node_logits.device)
    return count_verdicts(name, tree, exits, bonus, seconds, round_.temperature)


def _mean_and_stderr(values: torch.Tensor) -> tuple[float, float]:
    values = values.double()
    stderr = float(values.std() / math.sqrt(values.numel())) if values.numel() > 1 else float("nan")
    return float(values.mean()), stderr


@dataclass(frozen=True)
class RoundsResult:
    """One verdict per round by one verifier: each round's block length L, its tree's 1 + C, its first token."""

    verifier: str
    temperature: float
    emitted: torch.Tensor  # (R,) long: depth(exit) + 1 of each round's verdict
    expected_lengths: torch.Tensor  # (R,) float64: 1 + C of each round's tree
    first_tokens: torch.Tensor  # (R,) long: the first token each round emits (its first draft token, or the bonus)
    law_variances: torch.Tensor | None = None  # (R,) float64: Var(L | tree) under X, for a rule optimal here

    @property
    def n(self) -> int:
        return int(self.emitted.numel())

    def mean_emitted(self) -> tuple[float, float]:
        """E[L] over the rounds and its standard error."""
        return _mean_and_stderr(self.emitted)

    def mean_expected_length(self) -> tuple[float, float]:
        """E[1 + C] over the rounds' trees and its standard error."""
        return _mean_and_stderr(self.expected_lengths)

    def length_gap(self) -> tuple[float, float]:
        """Mean of L - (1 + C) per round and its standard error: 0 in expectation for an optimal rule.

        When every round's block length is the same, the rounds' spread says nothing of L's own noise (a few
        rounds of a sharp target often all end alike), so the plain standard error would be a false 0. For a
        rule optimal here L given the tree follows X, whose variance is known: the gap's variance is then the
        mean of Var(L | tree) over the rounds, and its standard error sqrt(that / R). For any other rule the
        standard error is NaN, shown as "too few rounds" (as for a single round).
        """
        gap, stderr = _mean_and_stderr(self.emitted.double() - self.expected_lengths)
        if self.n > 1 and bool((self.emitted == self.emitted[0]).all()):
            stderr = (math.sqrt(float(self.law_variances.mean()) / self.n) if self.law_variances is not None
                      else float("nan"))
        return gap, stderr

    def first_token_pvalue(self, target_probs: torch.Tensor) -> float:
        """Chi-square p-value of the first emitted tokens against the target's row (V,) at the rounds' context.

        Meaningful when every round starts at that one context: an exact rule's
        first token is then a sample of that row, whatever tree each round drew.
        """
        counts = torch.bincount(self.first_tokens, minlength=target_probs.numel())
        return chi_square_pvalue(*chi_square(counts.double().numpy(), target_probs.double().cpu().numpy()))

    def summary(self, target_probs: torch.Tensor) -> dict[str, float]:
        """E[L], E[1 + C] and their gap, each with its standard error, and the first token's χ² p-value against
        the target's row at the rounds' one context."""
        (length, length_se), (expected, expected_se), (gap, gap_se) = (
            self.mean_emitted(), self.mean_expected_length(), self.length_gap())
        return {"mean_emitted": length, "mean_emitted_se": length_se, "mean_expected_length": expected,
                "mean_expected_length_se": expected_se, "gap": gap, "gap_se": gap_se,
                "first_token_p": self.first_token_pvalue(target_probs)}


def verify_rounds(names: Sequence[str], rounds: Sequence[tuple[DraftTree, torch.Tensor]], temperature: float,
                  seed: int) -> dict[str, RoundsResult]:
    """Each verifier in `names` once on every (tree, node logits) round, as the decoding loop calls it: the
    round's flow handed in, and one generator per verifier for the whole run (from `seed`), so a rule's verdicts
    do not depend on which other rules ran. Every rule sees the same trees: a paired comparison."""
    if not rounds:
        raise ValueError("verify_rounds needs at least one round")
    verifiers = {name: (get_verifier(name), make_generator(seed)) for name in names}
    lengths: dict[str, list[int]] = {name: [] for name in names}
    first: dict[str, list[int]] = {name: [] for name in names}
    expected, variances = [], []
    for tree, logits in rounds:
        flow = target_flow(tree, logits, temperature, missing_k=0)
        expected.append(flow.expected_length)
        variances.append(flow.length_variance(tree))
        for name, (verify, generator) in verifiers.items():
            verdict = verify(tree, logits, temperature, generator, flow=flow)
            lengths[name].append(verdict.emitted)
            first[name].append(int(tree.tokens[verdict.path[1]]) if len(verdict.path) > 1 else int(verdict.bonus_token))
    expected_lengths = torch.tensor(expected, dtype=torch.float64)
    law_variances = torch.tensor(variances, dtype=torch.float64)
    return {name: RoundsResult(name, float(temperature), torch.tensor(lengths[name]), expected_lengths,
                               torch.tensor(first[name]),
                               law_variances if standing(name, temperature) == OPTIMAL else None)
            for name in names}
