"""The counts serving engines report for speculative decoding, read off a decode's round records.

vLLM reports `num_drafts`, `num_draft_tokens`, `num_accepted_tokens` and
`num_accepted_tokens_per_pos` (its `SpecDecodingStats` and the
`vllm:spec_decode_*` metrics); SGLang's accept length is the same
`1 + num_accepted_tokens / num_drafts`. The same names here mean the same
things on a tree: a draft is a round that scored a tree with at least one
draft node, its draft tokens are the nodes scored, its accepted tokens the
accepted path without the bonus, and position i counts the drafts whose
accepted path reached depth i + 1. On a tree the acceptance rate
(accepted / draft tokens) is low by design (most nodes are siblings no
verdict can take); E[L] and 1 + C, which tevcore reports beside these
counts, say what the tree was worth.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable

from tevcore.engine.records import RoundRecord


@dataclass(frozen=True)
class SpecDecodeCounts:
    """vLLM-named counts of a decode's rounds (the bonus token is never an accepted draft token)."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: list[int]

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens per draft token scored (vLLM's draft acceptance rate); 0 with no draft."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted draft tokens per draft (vLLM's mean acceptance length, SGLang's accept length)."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    @property
    def acceptance_rate_per_pos(self) -> list[float]:
        """Per position, the share of drafts whose accepted path reached it."""
        return [count / self.num_drafts for count in self.num_accepted_tokens_per_pos] if self.num_drafts else []

    def to_dict(self) -> dict:
        """The counts and the rates derived from them, under the engines' names."""
        return {**asdict(self), "acceptance_rate": self.acceptance_rate,
                "mean_acceptance_length": self.mean_acceptance_length,
                "acceptance_rate_per_pos": self.acceptance_rate_per_pos}


def spec_decode_counts(records: Iterable[RoundRecord]) -> SpecDecodeCounts:
    """The counts of every round that drafted (a round that skipped its drafter scored no draft token)."""
    return counts_of_drafts((record.tree.size, max(len(record.path) - 1, 0)) for record in records)


def counts_of_drafts(rounds: Iterable[tuple[int, int]]) -> SpecDecodeCounts:
    """The counts of rounds given as (draft tokens scored, draft tokens accepted): what a command that keeps no
    records (gathered across ranks) passes; a round of 0 draft tokens is no draft."""
    drafts = draft_tokens = accepted = 0
    per_pos: list[int] = []
    for size, depth in rounds:
        if size == 0:
            continue
        drafts += 1
        draft_tokens += size
        accepted += depth
        per_pos += [0] * (depth - len(per_pos))
        for position in range(depth):
            per_pos[position] += 1
    return SpecDecodeCounts(drafts, draft_tokens, accepted, per_pos)
