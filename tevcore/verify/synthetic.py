"""A synthetic target and drafter over a tiny vocabulary, and the exact law of the strings the target emits.

The target's logits after any context are a fixed pseudo-random row seeded
by a hash of that context, so every law over strings is a finite product of
known rows: the exactness tests and the conformance suite enumerate it
exactly, with the warpers of `sampling.warp_logits` applied as decoding
applies them. The drafter proposes the target's rows along its greedy path
plus seeded noise: close enough that trees are accepted deep, wrong enough
that siblings and rejections happen.
"""

from __future__ import annotations

import itertools
import zlib
from collections import defaultdict
from typing import Callable, Iterable

import torch

from tevcore.engine.sampling import probs, warp_logits

BlockLaw = Callable[[tuple[int, ...]], Iterable[tuple[tuple[int, ...], float]]]


def seeded_generator(*key: object) -> torch.Generator:
    """A generator seeded by a hash of `key`: fixed pseudo-random numbers per prefix, tree or case."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def seeded_logits(*key: object, vocab: int, scale: float = 2.0, keyed_by_vocab: bool = True) -> torch.Tensor:
    """A fixed pseudo-random float64 logit row per key (a context, or a context and a depth).

    `keyed_by_vocab` False seeds by the key alone (the exactness tests' 6-token rows keep the seeds they had)."""
    generator = seeded_generator(*key, vocab) if keyed_by_vocab else seeded_generator(*key)
    return scale * torch.randn(vocab, generator=generator, dtype=torch.float64)


def draft_rows(target: Callable[[tuple[int, ...]], torch.Tensor], noise: Callable[[tuple[int, ...], int], torch.Tensor],
               context: tuple[int, ...], depth: int) -> torch.Tensor:
    """(depth, V) draft log-probs: the target's row along its greedy path from `context`, plus `noise(context, d)`."""
    rows, path = [], context
    for d in range(depth):
        target_row = target(path)
        rows.append(torch.log_softmax(target_row + noise(context, d), -1))
        path = path + (int(target_row.argmax()),)
    return torch.stack(rows)


def compose_rounds(block_law: BlockLaw, start: tuple[int, ...], horizon: int) -> dict[tuple[int, ...], float]:
    """Law of the first `horizon` emitted tokens: each round's law of what it emits, composed from `start`."""

    def compose(context: tuple[int, ...], needed: int) -> dict[tuple[int, ...], float]:
        out: dict[tuple[int, ...], float] = defaultdict(float)
        for block, prob in block_law(context):
            if len(block) >= needed:
                out[block[:needed]] += prob
            else:
                for rest, rest_prob in compose(context + block, needed - len(block)).items():
                    out[block + rest] += prob * rest_prob
        return out

    return dict(compose(start, horizon))


def strings_law(target: Callable[[tuple[int, ...]], torch.Tensor], vocab: int, start: tuple[int, ...], horizon: int,
                temperature: float, top_k: int | None = None,
                top_p: float | None = None) -> dict[tuple[int, ...], float]:
    """The target's exact law over every `horizon`-token string after `start`: the product of its warped
    conditionals (T = 0: the greedy string has probability 1)."""
    def row(context: tuple[int, ...]) -> list[float]:
        return probs(warp_logits(target(context), temperature, top_k, top_p), temperature).tolist()

    law = {}
    for string in itertools.product(range(vocab), repeat=horizon):
        prob = 1.0
        for i, token in enumerate(string):
            prob *= row(start + string[:i])[token]
            if prob == 0.0:
                break
        law[string] = prob
    return law
