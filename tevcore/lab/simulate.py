"""Many verifications of one scored tree at once, by the shipped rules.

`simulate` runs n independent verdicts of the same tree through
`verifiers.draw`: the very rule a decoding round runs with n = 1, here with
n = 1e5, and the shared bonus draw per exit node. It returns the counts the
laws (`tevcore.verify.laws`) are tested against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree
from tevcore.timing import seconds_of
from tevcore.verify.scored import scored_round
from tevcore.verify.verifiers import draw, get_rule

BonusCounts = dict[int, tuple[torch.Tensor, torch.Tensor]]  # exit node -> (token ids, counts)


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

    @property
    def mean_block_length(self) -> float:
        lengths = torch.arange(self.length_counts.numel(), dtype=torch.float64)
        return float((lengths * self.length_counts).sum()) / self.n

    @property
    def block_length_stderr(self) -> float:
        """Standard error of `mean_block_length`."""
        lengths = torch.arange(self.length_counts.numel(), dtype=torch.float64)
        second = float((lengths.square() * self.length_counts).sum()) / self.n
        return math.sqrt(max(second - self.mean_block_length ** 2, 0.0) / self.n)


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
