"""Drafter evaluation: E = 1 + coverage and the measured mean block length on held-out prompts.

Both figures come from the real decoding loop (`tevcore.decode.rounds`) with
the TEV verifier: E is the flow's expected length of each round's tree,
averaged over rounds; the block length is what the verifier accepted plus the
bonus. They must agree within noise; a gap points at a bug, not a drafter.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from statistics import mean

from tqdm import tqdm

from ..config import DecodeConfig
from ..datasets import Prompt
from ..decode import prompt_ids, rounds
from ..flow import target_flow
from ..models import Target
from ..oracle import oracle_tree
from ..sampling import gumbel_argmax, make_generator
from ..target import TargetSession
from .prompts import heldout_prompts

BUDGETS = ("chain", 4, 8, 16, 32)
MIX = ("mt-bench", "humaneval", "gsm8k")


@dataclass(frozen=True)
class EvalCell:
    """One (temperature, budget) cell over a prompt set."""

    temperature: float
    budget: str
    prompts: int
    rounds: int
    expected_length: float  # mean over rounds of 1 + coverage
    block_length: float  # mean over rounds of accepted + bonus
    prompt_set: str = "all"  # "all" prompts, or one held-out set's share of them


PromptLike = Prompt | str | list[int]


def eval_prompts(datasets: tuple[str, ...], per_set: int) -> list[Prompt]:
    """The first `per_set` held-out prompts of each set, interleaved so a cut keeps the mix."""
    lists = [heldout_prompts(name)[:per_set] for name in datasets]
    return [lst[i] for i in range(per_set) for lst in lists if i < len(lst)]


def _content(prompt: PromptLike) -> str | list[int]:
    return prompt.text if isinstance(prompt, Prompt) else prompt


def evaluate(target: Target, proposer, prompts: list[PromptLike], temperature: float, budgets=BUDGETS,
             max_new_tokens: int = 64, seed: int = 0, progress: bool = True, by_set: bool = False) -> list[EvalCell]:
    """Run every prompt at every budget; 'chain' is the top-1 path of the drafter's full depth.

    Each budget gives a cell over all prompts; with `by_set`, one more per
    held-out set among them (a mix can hide a set the drafter serves badly).
    """
    cells = []
    for budget in budgets:
        builder = "chain" if budget == "chain" else "best_first"
        size = proposer.depth if budget == "chain" else int(budget)
        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, budget=size,
                              builder=builder, verifier="tev", seed=seed)
        per_set: dict[str, list[tuple[float, int]]] = defaultdict(list)  # set -> (E, block) per round
        prompt_counts: dict[str, int] = defaultdict(int)
        for prompt in tqdm(prompts, desc=f"T={temperature} B={budget}", disable=not progress, leave=False):
            name = prompt.dataset if isinstance(prompt, Prompt) else "given"
            prompt_counts[name] += 1
            for record in rounds(target, proposer, prompt_ids(target, _content(prompt)), config):
                per_set[name].append((record.flow.expected_length, record.block_length))
        groups = {"all": [row for rows in per_set.values() for row in rows]}
        if by_set:
            groups.update(per_set)
        for name, rows in groups.items():
            count = len(prompts) if name == "all" else prompt_counts[name]
            cells.append(EvalCell(float(temperature), str(budget), count, len(rows),
                                  mean(e for e, _ in rows), mean(b for _, b in rows), name))
    return cells


def oracle_ceilings(target: Target, prompts: list[PromptLike], temperature: float, budgets: list[int],
                    max_new_tokens: int = 64, seed: int = 0, progress: bool = True) -> list[EvalCell]:
    """1 + C of the oracle tree (`tevcore.oracle`) at each budget: the ceiling of E for any drafter.

    Averaged over every position of an autoregressive decode at `temperature`
    (a drafter's E averages over round starts of its own decode), so it is
    the ceiling to set beside a drafter's E on the same prompts. The block
    length column repeats E: the oracle tree is never verified.
    """
    largest = max(budgets)
    totals = {b: [] for b in budgets}
    generator = make_generator(seed)
    stops = target.stop_token_ids()
    for prompt in tqdm(prompts, desc=f"oracle T={temperature}", disable=not progress, leave=False):
        session = TargetSession(target)
        session.prefill(prompt_ids(target, _content(prompt)), reserve=max_new_tokens + largest + 1)
        for _ in range(max_new_tokens):
            tree = oracle_tree(session, largest, temperature)
            logits = session.score_tree(tree).logits
            path_prob = target_flow(tree, logits, temperature).path_prob
            for b in budgets:
                totals[b].append(1.0 + float(path_prob[1:b + 1].sum()))
            token = int(gumbel_argmax(logits[0], temperature, generator))
            session.commit([0], token)
            if token in stops:
                break
    return [EvalCell(float(temperature), f"oracle {b}", len(prompts), len(totals[b]), mean(totals[b]),
                     mean(totals[b])) for b in budgets]


def format_table(cells: list[EvalCell]) -> str:
    lines = [f"{'T':>4} {'budget':>9} {'prompts':<10} {'n':>3} {'rounds':>7} {'E=1+C':>7} {'block':>7}"]
    for c in cells:
        lines.append(f"{c.temperature:>4g} {c.budget:>9} {c.prompt_set:<10} {c.prompts:>3} {c.rounds:>7} "
                     f"{c.expected_length:>7.3f} {c.block_length:>7.3f}")
    return "\n".join(lines)


def cells_to_json(cells: list[EvalCell]) -> list[dict]:
    return [asdict(c) for c in cells]
