"""Context lookup: mix a drafter's rows with what followed the last n-gram match in the context.

Code and arithmetic repeat their own context (names, numbers, whole lines),
which a small drafter predicts badly and a search of the committed tokens
predicts well. When the longest suffix of the context (root included) of
length `min_ngram`..`max_ngram` occurred before, the tokens that followed it
form a chain c_1..c_K, and depth d's row becomes the mixture
(1 - b_d) q_d + b_d 1[c_d] (in the shared rows, and in the rows below c_1
when the drafter gave rows that know c_1). b_d is the running hit rate of
depth-d lookups in this session (a Beta(1, 1) prior), read off the tokens the
target went on to commit, so the mixture trusts the lookup exactly as much as
it has earned.
Chains may run deeper than the inner drafter (`chain_depth`, 10 as in HF's
prompt-lookup decoding); there the inner row is uniform.
An inner proposer that grows its own tree (a draft LM) gets the mixture as
a `RowMix` instead: the row of every node whose path is c_1..c_{d-1} mixes
in c_d, every other node keeps its own row, so its tree stays conditioned on
each path.
Any tree stays exact under the exact verifiers; the mixture only decides
which tokens the tree holds.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import torch

from tevcore.engine.draft_rows import BelowPath, DraftRows, as_draft_rows
from tevcore.target.session import TargetSession
from tevcore.engine.builder_specs import BuilderSpec
from tevcore.engine.tree import DraftTree
from tevcore.proposer_protocol import Proposer, RowMix
from tevcore.proposers.base import NoDrafter, ProposerBase
from tevcore.proposers.kind import DrafterKind, keyword

SUFFIX = "+lookup"  # mixes the lookup into any proposer spec


def lookup_continuation(context: list[int], length: int, min_ngram: int = 2, max_ngram: int = 4) -> list[int]:
    """Up to `length` tokens that followed the latest earlier match of the context's longest suffix."""
    if not 1 <= min_ngram <= max_ngram:
        raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
    end = len(context)
    for n in range(min(max_ngram, end - 1), min_ngram - 1, -1):
        suffix = context[end - n:]
        for start in range(end - n - 1, -1, -1):  # latest occurrence first, never the suffix itself
            if context[start:start + n] == suffix:
                return context[start + n:start + n + length]
    return []


@dataclass
class _HitCounts:
    """Per-session record of how often each depth's lookup token was what the target committed."""

    hits: list[int]
    trials: list[int]
    pending_start: int = 0  # committed length when the last chain was proposed
    pending_chain: list[int] = field(default_factory=list)
    chain_at: int = -1  # committed length the cached `chain` was looked up at
    chain: list[int] = field(default_factory=list)

    def rates(self) -> list[float]:
        """Posterior mean hit rate per depth under a Beta(1, 1) prior."""
        return [(h + 1) / (t + 2) for h, t in zip(self.hits, self.trials)]

    def learn(self, committed: list[int]) -> None:
        """Score the pending chain against the tokens committed since it was proposed (once: it is then spent)."""
        revealed = committed[self.pending_start:]
        for d, token in enumerate(self.pending_chain[:len(revealed)]):
            self.trials[d] += 1
            if revealed[d] != token:
                break
            self.hits[d] += 1
        self.pending_chain = []


class ContextLookupProposer(ProposerBase):
    """A `Proposer` that mixes an inner proposer's rows with a context lookup chain.

    Hit counts live per target session (weakly keyed), so one proposer can
    serve several decodes at once without their statistics mixing.
    """

    def __init__(self, inner: Proposer, min_ngram: int = 2, max_ngram: int = 4, chain_depth: int = 10) -> None:
        lookup_continuation([], 0, min_ngram, max_ngram)  # validates the n-gram range
        if chain_depth < 1:
            raise ValueError(f"chain_depth must be >= 1, got {chain_depth}")
        self.inner = inner
        self.depth = max(inner.depth, chain_depth)
        self.hidden_layers = inner.hidden_layers
        self.stand_in = inner.stand_in
        self.name = f"{inner.name} + context lookup"
        self.min_ngram, self.max_ngram = min_ngram, max_ngram
        self._counts: weakref.WeakKeyDictionary[TargetSession, _HitCounts] = weakref.WeakKeyDictionary()

    def hit_rates(self, session: TargetSession) -> list[float]:
        """The mixture weight b_d of each depth for this session (0.5 before any evidence)."""
        counts = self._counts.get(session)
        return counts.rates() if counts is not None else [0.5] * self.depth

    def _session_counts(self, session: TargetSession) -> _HitCounts:
        counts = self._counts.get(session)
        if counts is None:
            counts = self._counts[session] = _HitCounts([0] * self.depth, [0] * self.depth)
        return counts

    def _chain(self, session: TargetSession) -> list[int]:
        """The lookup chain of the current context (looked up once per committed length)."""
        counts = self._session_counts(session)
        if counts.chain_at != len(session.committed):
            counts.chain = lookup_continuation(session.committed, self.depth, self.min_ngram, self.max_ngram)
            counts.chain_at = len(session.committed)
        return counts.chain

    def has_cheap_evidence(self, session: TargetSession) -> bool:
        """A lookup match is known without running the inner drafter (see `skip_gate`)."""
        return bool(self._chain(session))

    def propose_tree(self, session: TargetSession, builder: BuilderSpec, budget: int, temperature: float,
                     generator: torch.Generator, mix: RowMix | None = None) -> DraftTree | None:
        """The inner proposer's own tree, each node's row mixed with the chain where its path follows the chain;
        None (rows from `propose`) for an inner proposer that does not grow trees."""
        counts = self._session_counts(session)
        counts.learn(session.committed)
        chain, rates = self._chain(session), counts.rates()

        def along_chain(path: list[int], row: torch.Tensor) -> torch.Tensor:
            row = mix(path, row) if mix is not None else row
            depth = len(path)
            if depth < len(chain) and path == chain[:depth]:
                return _mix_row(row, chain[depth], rates[depth])
            return row

        tree = self.inner.propose_tree(session, builder, budget, temperature, generator, along_chain)
        if tree is not None:
            counts.pending_start, counts.pending_chain = len(session.committed), chain
        return tree

    def propose(self, session: TargetSession) -> DraftRows:
        counts = self._session_counts(session)
        counts.learn(session.committed)
        rows = as_draft_rows(self.inner.propose(session))
        shared = _pad_uniform(rows.shared, self.depth)
        below = {t: _pad_uniform(r, self.depth - 1) for t, r in rows.after_first.items()}
        chain = self._chain(session)
        counts.pending_start, counts.pending_chain = len(session.committed), chain
        rates = counts.rates() if chain else []
        below_path = self._below_path(rows, chain, rates)
        if not chain:
            return DraftRows(shared, below, below_path, rows.known_depth)
        shared = _mix(shared, chain, rates)
        if chain[0] in below:  # the chain's own branch: its deeper tokens follow that first token
            below[chain[0]] = _mix(below[chain[0]], chain[1:], rates[1:])
        return DraftRows(shared, below, below_path, rows.known_depth)

    def _below_path(self, rows: DraftRows, chain: list[int], rates: list[float]) -> BelowPath | None:
        """The inner rows below a path, padded to the lookup's depth, mixed with the chain where the path is a
        prefix of it."""
        inner = rows.below_path
        if inner is None:
            return None

        def below_path(paths: list[tuple[int, ...]]) -> list[torch.Tensor]:
            out = []
            for path, found in zip(paths, inner(paths)):
                found = _pad_uniform(found, self.depth - len(path))
                if chain and list(path) == chain[:len(path)]:
                    found = _mix(found, chain[len(path):], rates[len(path):])
                out.append(found)
            return out

        return below_path


def _pad_uniform(rows: torch.Tensor, depth: int) -> torch.Tensor:
    """Rows deeper than the inner drafter's are uniform."""
    if rows.shape[0] >= depth:
        return rows
    flat = rows.new_full((depth - rows.shape[0], rows.shape[1]), -math.log(rows.shape[1]))
    return torch.cat([rows, flat])


def _mix(rows: torch.Tensor, chain: list[int], rates: list[float]) -> torch.Tensor:
    """Row d becomes (1 - b_d) q_d + b_d 1[c_d] for each chain token c_d."""
    mixed = rows.clone()
    for d, (token, weight) in enumerate(zip(chain, rates)):
        mixed[d] = _mix_row(rows[d], token, weight)
    return mixed


def _mix_row(row: torch.Tensor, token: int, weight: float) -> torch.Tensor:
    """(1 - b) q + b 1[token] of one (V,) log-prob row q."""
    mixed = row + math.log1p(-weight)
    mixed[token] = torch.logaddexp(mixed[token], torch.tensor(math.log(weight), dtype=row.dtype, device=row.device))
    return mixed


KIND = DrafterKind("lookup", "lookup", "the context lookup over flat rows, no drafter", keyword("lookup"),
                   lambda source, target, options: ContextLookupProposer(NoDrafter(target.vocab_size)),
                   ready=("lookup",))
