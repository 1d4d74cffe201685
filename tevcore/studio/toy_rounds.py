"""Sampled rounds on a toy target (no model): many draws of a sampled tree at one context.

The toy target is a fixed function of the prefix (its row after a path is
seeded by the path's tokens), so every realised tree scores the same target
and a rule that is exact over the tree's draws emits target samples across
rounds. The drafter gives one row per depth (a block drafter's shape), close
to the target's rows but not equal. The trees come from the engine's sampled
builder (a `BuilderSpec`); this module only makes the toy rows. The verifier
comparison draws them through `tevcore.studio.comparison.toy_rounds`, which
applies the server's cap and takes a compute-queue turn.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import torch

from tevcore.engine.builders import best_first
from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree
from tevcore.engine.builder_specs import BuilderSpec
from tevcore.lab.context_rounds import SampledRounds, check_sampled, matched_budget

TOY_VOCAB = 12
TOY_DEPTH = 4
TARGET_NOISE = 1.0  # how far the toy target's rows stray from the drafter's (logit units)
ROOT_TOKEN = 0


def _prefix_logits(draft_logits: torch.Tensor, prefix: tuple[int, ...], seed: int) -> torch.Tensor:
    """The toy target's logits after `prefix` (tokens after the root): the drafter's row for the next depth plus
    noise seeded by the prefix, so the target depends on the whole path and is the same in every round."""
    generator = torch.Generator().manual_seed(zlib.crc32(repr((seed, prefix)).encode()))
    base = draft_logits[min(len(prefix), draft_logits.shape[0] - 1)]
    return base + TARGET_NOISE * torch.randn(base.numel(), generator=generator)


def toy_draft_logits(seed: int, vocab: int = TOY_VOCAB, depth: int = TOY_DEPTH) -> torch.Tensor:
    """The toy drafter's (depth x vocab) logits: one row per depth, fairly sharp."""
    return 2.0 * torch.randn(depth, vocab, generator=torch.Generator().manual_seed(seed))


def draw_toy_rounds(builder: BuilderSpec, rounds: int, budget: int | None, temperature: float, seed: int,
                    vocab: int = TOY_VOCAB, depth: int = TOY_DEPTH,
                    between: Callable[[], None] | None = None) -> SampledRounds:
    """`rounds` trees drawn by `builder` (sampled:K1,... or sampled-wor:K1,...) at one toy context, one
    generator for the run, each tree scored by the toy target; `between()` is called before each tree (a page
    that is gone stops the draw there)."""
    check_sampled(builder, rounds)
    builder.check_depth(depth)
    draft_logits = toy_draft_logits(seed, vocab, depth)
    generator = make_generator(seed)
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def scored(tree: DraftTree) -> tuple[DraftTree, torch.Tensor]:
        tokens = tree.tokens.tolist()
        rows = []
        for node in range(tree.num_nodes):
            prefix = tuple(tokens[u] for u in tree.path(node)[1:])
            if prefix not in cache:
                cache[prefix] = _prefix_logits(draft_logits, prefix, seed)
            rows.append(cache[prefix])
        return tree, torch.stack(rows)

    draft = torch.log_softmax(draft_logits, -1)
    out = []
    for _ in range(rounds):
        if between is not None:
            between()
        out.append(scored(builder(ROOT_TOKEN, draft, budget, temperature, generator)))
    largest = matched_budget([tree for tree, _ in out], budget if budget is not None else 4 * depth)
    fixed = scored(best_first(ROOT_TOKEN, draft, largest))
    return SampledRounds(builder, float(temperature), out, fixed)


def toy_texts(vocab: int = TOY_VOCAB) -> list[str]:
    """The toy vocabulary's token texts."""
    return [f"t{i}" for i in range(vocab)]

