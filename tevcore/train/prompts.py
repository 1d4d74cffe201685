"""Training prompts for distillation, never overlapping the held-out evaluation split.

The split itself lives in `tevcore.lab.datasets` (every 5th item of each set is
held out) so that the benchmark and training agree by construction. Sets
overlap in places, so an item is trainable only when its text is held out in
no set at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from tevcore.lab.datasets import DATASETS, Prompt, load_prompts


def heldout_prompts(dataset: str) -> list[Prompt]:
    """The evaluation items of a set (shared with the benchmark). Never trained on."""
    return load_prompts(dataset, "heldout")


@lru_cache(maxsize=1)
def _heldout_texts() -> frozenset[str]:
    return frozenset(p.text.strip() for name in DATASETS for p in load_prompts(name, "heldout"))


def training_prompts(dataset: str) -> list[Prompt]:
    """Items of a set that may be trained on: not held out here nor in any other set."""
    banned = _heldout_texts()
    return [p for p in load_prompts(dataset, "train") if p.text.strip() not in banned]


def all_training_prompts(sets: Iterable[str] | None = None) -> list[Prompt]:
    """Training items of every set (or of `sets`), each prompt text once, in a fixed order."""
    seen: set[str] = set()
    out = []
    chosen = set(DATASETS if sets is None else sets)
    for name in (n for n in DATASETS if n in chosen):
        for prompt in training_prompts(name):
            if prompt.text.strip() not in seen:
                seen.add(prompt.text.strip())
                out.append(prompt)
    return out
