"""Drafter evaluation: E = 1 + coverage and the measured mean block length on held-out prompts.

Both figures come from the real decoding loop (`tevcore.decoding.loop.rounds`) with
the TEV verifier: E is the flow's expected length of each round's tree,
averaged over rounds; the block length is what the verifier accepted plus the
bonus. They must agree within noise; a gap points at a bug, not a drafter.
`paired_coverage` compares two proposers at the same round starts instead,
which removes the chance of each decode sampling its own text, and
`shared_start_coverage` any number of them in one decode.

Every prompt's decode draws from its own seed, so under torchrun the ranks
share the prompts (`tevcore.ranks.shard`) and gather their rounds, and every
cell equals the one-process run's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from statistics import mean
from typing import Callable

import torch
from tqdm import tqdm

from tevcore.engine.builders import best_first, check_budget
from tevcore.engine.spec_counts import counts_of_drafts
from tevcore.config import DecodeConfig
from tevcore.lab.datasets import Prompt, fitting
from tevcore.decoding.loop import prompt_ids, reserved_positions, rounds
from tevcore.target.walker import walk
from tevcore.engine.flow import parent_edge_log_probs, path_log_probs, target_flow
from tevcore.engine.tree import union
from tevcore.target.loading import Target
from tevcore.decoding.oracle import oracle_tree
from tevcore.engine.sampling import make_generator
from tevcore.ranks import gather, is_first, shard
from tevcore.results import Column, format_table as tabulate_rows
from tevcore.target.session import TargetSession
from tevcore.train.prompts import heldout_prompts

BUDGETS = ("chain", 4, 8, 16, 32)
MIX = ("mt-bench", "humaneval", "gsm8k")  # held-out sets at T > 0
GREEDY_SETS = ("humaneval",)  # held-out sets at T = 0


def prompt_sets(temperature: float) -> tuple[str, ...]:
    """The held-out sets eval-drafter reads by default at `temperature`."""
    return GREEDY_SETS if temperature == 0 else MIX


@dataclass(frozen=True)
class EvalCell:
    """One (temperature, budget) cell over a prompt set."""

    temperature: float
    budget: str
    prompts: int
    rounds: int
    expected_length: float  # mean over rounds of 1 + coverage
    mean_emitted: float  # mean over rounds of accepted + bonus (E[L])
    expected_length_se: float  # of E, clustered by prompt (one prompt's rounds share its text); NaN for one prompt
    prompt_set: str = "all"  # "all" prompts, or one held-out set's share of them
    spec_decode: dict | None = None  # vLLM-named counts of the rounds (`tevcore.engine.spec_counts`)


PromptLike = Prompt | str | list[int]


def eval_prompts(datasets: tuple[str, ...], per_set: int) -> list[Prompt]:
    """The first `per_set` held-out prompts of each set, interleaved so a cut keeps the mix."""
    lists = [heldout_prompts(name)[:per_set] for name in datasets]
    return [lst[i] for i in range(per_set) for lst in lists if i < len(lst)]


def _ids(target: Target, prompt: PromptLike, reserve: int) -> list[int]:
    """A prompt's token ids; a set's prompt too long for the context is refused naming its file and line."""
    if isinstance(prompt, Prompt):
        return fitting(prompt, prompt_ids(target, prompt.text), reserve, target.max_context)
    return prompt_ids(target, prompt)


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
                              builder=builder, verifier="tev", seed=seed, record="lean")
        measured = []  # (prompt, E, L) per round of this rank's prompts
        for index, prompt in tqdm(shard(prompts), desc=f"T={temperature} B={budget}",
                                  disable=not progress or not is_first(), leave=False):
            ids = _ids(target, prompt, reserved_positions(max_new_tokens, proposer.depth))
            for record in rounds(target, proposer, ids, config):
                measured.append((index, record.flow.expected_length, record.emitted, record.tree.size,
                                 len(record.path) - 1))
        per_set: dict[str, list[tuple[float, int, int, int, int]]] = defaultdict(list)  # set -> (E, L, prompt,
        # draft tokens, accepted) per round
        prompt_counts: dict[str, int] = defaultdict(int)
        for prompt in prompts:
            prompt_counts[_set_of(prompt)] += 1
        for index, e, emitted, size, accepted in sorted(gather(measured), key=lambda row: row[0]):  # stable
            per_set[_set_of(prompts[index])].append((e, emitted, index, size, accepted))
        groups = {"all": [row for rows in per_set.values() for row in rows]}
        if by_set:
            groups.update(per_set)
        for name, rows in groups.items():
            count = len(prompts) if name == "all" else prompt_counts[name]
            cells.append(EvalCell(float(temperature), str(budget), count, len(rows), mean(r[0] for r in rows),
                                  mean(r[1] for r in rows), _clustered_se([r[0] for r in rows], [r[2] for r in rows]),
                                  name, counts_of_drafts((r[3], r[4]) for r in rows).to_dict()))
    return cells


def _set_of(prompt: PromptLike) -> str:
    return prompt.dataset if isinstance(prompt, Prompt) else "given"


RootLogits = Callable[[int, TargetSession], torch.Tensor]


def walk_decode(target: Target, prompts: list[PromptLike], temperature: float, max_new_tokens: int, seed: int,
                reserve: int, measure: RootLogits, hidden_layers: tuple[int, ...] = (), progress: bool = True,
                desc: str = "positions") -> None:
    """An autoregressive decode of every prompt, calling `measure(prompt index, session)` at each position.

    `measure` scores whatever trees it likes and must leave the last one in
    place (not rolled back) and return that tree's root row of logits; the
    next token is drawn from it and committed. Every measuring tool that
    needs the same round starts for all its subjects walks this one decode.
    Prompt i draws from seed + i; under torchrun this rank walks only its
    share of the prompts (the caller gathers what it measured).
    """
    stops = target.stop_token_ids()
    for index, prompt in tqdm(shard(prompts), desc=desc, disable=not progress or not is_first(), leave=False):
        generator = make_generator(seed + index)
        session = TargetSession(target, hidden_layers=hidden_layers)
        room = max_new_tokens + reserve + 1
        session.prefill(_ids(target, prompt, room), reserve=room)
        walk(session, max_new_tokens, temperature, generator, stops, lambda s, index=index: measure(index, s))


def oracle_ceilings(target: Target, prompts: list[PromptLike], temperature: float, budgets: list[int],
                    max_new_tokens: int = 64, seed: int = 0, progress: bool = True) -> list[EvalCell]:
    """1 + C of the oracle tree (`tevcore.decoding.oracle`) at each budget: the ceiling of E for any drafter.

    Averaged over every position of an autoregressive decode at `temperature`
    (a drafter's E averages over round starts of its own decode), so it is
    the ceiling to set beside a drafter's E on the same prompts. The block
    length column repeats E: the oracle tree is never verified.
    """
    largest = max(budgets)
    measured: list[tuple[int, list[float]]] = []  # (prompt, 1 + C per budget) per position

    def measure(index: int, session: TargetSession) -> torch.Tensor:
        tree = oracle_tree(session, largest, temperature)
        logits = session.score_tree(tree).logits
        path_prob = target_flow(tree, logits, temperature).path_prob
        measured.append((index, [1.0 + float(path_prob[1:b + 1].sum()) for b in budgets]))
        return logits[0]

    walk_decode(target, prompts, temperature, max_new_tokens, seed, largest, measure, progress=progress,
                desc=f"oracle T={temperature}")
    positions = sorted(gather(measured), key=lambda row: row[0])
    where = [index for index, _ in positions]  # prompt index of each position
    totals = {b: [values[k] for _, values in positions] for k, b in enumerate(budgets)}
    return [EvalCell(float(temperature), f"oracle {b}", len(prompts), len(totals[b]), mean(totals[b]),
                     mean(totals[b]), _clustered_se(totals[b], where)) for b in budgets]


@dataclass(frozen=True)
class PairedCell:
    """Two proposers' E = 1 + C at the same round starts, and their difference with its standard error."""

    temperature: float
    budget: int
    prompt_set: str
    prompts: int
    positions: int
    baseline: str
    other: str
    baseline_length: float  # mean 1 + C of the baseline's best-first tree
    other_length: float
    difference: float  # other - baseline, mean over positions
    difference_se: float  # clustered by prompt: positions of one decode are not independent


def _clustered_se(values: list[float], clusters: list[int]) -> float:
    """Standard error of the mean of `values` when values sharing a cluster may be correlated."""
    centre = mean(values)
    sums: dict[int, float] = defaultdict(float)
    for value, cluster in zip(values, clusters):
        sums[cluster] += value - centre
    if len(sums) < 2:
        return math.nan
    scale = len(sums) / (len(sums) - 1)
    return math.sqrt(scale * sum(s * s for s in sums.values())) / len(values)


def paired_coverage(target: Target, baseline, other, prompts: list[PromptLike], temperature: float,
                    budgets: list[int], max_new_tokens: int = 64, seed: int = 0, progress: bool = True,
                    by_set: bool = False) -> list[PairedCell]:
    """E of two proposers' best-first trees at every position of ONE autoregressive decode: `other` - `baseline`.

    A drafter's own decode at T > 0 samples its own text, so two drafters
    compared that way differ by chance as much as by skill. Here both draft
    from the same contexts; the difference is paired, and its standard error
    is clustered by prompt. The one pair of `shared_start_coverage`.
    """
    return shared_start_coverage(target, [baseline, other], [(0, 1)], prompts, temperature, budgets, max_new_tokens,
                                 seed, progress, by_set)


def shared_start_coverage(target: Target, proposers: list, pairs: list[tuple[int, int]], prompts: list[PromptLike],
                          temperature: float, budgets: list[int], max_new_tokens: int = 64, seed: int = 0,
                          progress: bool = True, by_set: bool = False) -> list[PairedCell]:
    """Every proposer's E at every position of ONE decode; a paired difference per (A, B) index pair in `pairs`.

    Each position's context is the same for every proposer, so one decode
    serves any number of them, and every pair among them is paired: a
    checkpoint against the start and against its twin come from one run.
    Their best-first trees are merged (`tree.union`) and the target scores
    the union once; each tree's node logits are its rows of it. Each tree is
    built at the largest budget: a best-first tree lists its nodes best
    first, so its first b nodes are the tree of budget b. Cells come pair by
    pair, in the order of `pairs`.
    """
    if not pairs or any(not (0 <= a < len(proposers) and 0 <= b < len(proposers)) or a == b for a, b in pairs):
        raise ValueError(f"pairs must name two different proposers of the {len(proposers)}, got {pairs}")
    largest = max(check_budget(b) for b in budgets)
    layers = tuple(sorted({layer for proposer in proposers for layer in proposer.hidden_layers}))
    sets: list[str] = [p.dataset if isinstance(p, Prompt) else "given" for p in prompts]
    measured: list[tuple[int, list[list[float]]]] = []  # (prompt, per proposer 1 + C per budget) per position

    def measure(index: int, session: TargetSession) -> torch.Tensor:
        trees = [best_first(session.root_token, proposer.propose(session), largest) for proposer in proposers]
        merged, where = union(trees)
        logits = session.score_tree(merged).logits
        lengths = []
        for tree, nodes in zip(trees, where):
            path_prob = path_log_probs(tree, parent_edge_log_probs(tree, logits[nodes], temperature)).exp()
            lengths.append([1.0 + float(path_prob[1:b + 1].sum()) for b in budgets])
        measured.append((index, lengths))
        return logits[0]

    reserve = max(proposer.depth for proposer in proposers)
    walk_decode(target, prompts, temperature, max_new_tokens, seed, reserve, measure, layers, progress,
                desc=f"paired T={temperature}")
    positions = sorted(gather(measured), key=lambda row: row[0])
    where = [index for index, _ in positions]  # prompt index of each position
    groups = {"all": list(range(len(where)))}
    if by_set:
        for i, index in enumerate(where):
            groups.setdefault(sets[index], []).append(i)
    cells = []
    for a, b in pairs:
        for j, budget in enumerate(budgets):
            for name, rows in groups.items():
                base = [positions[i][1][a][j] for i in rows]
                alt = [positions[i][1][b][j] for i in rows]
                diffs = [y - x for x, y in zip(base, alt)]
                cells.append(PairedCell(
                    float(temperature), budget, name, len({where[i] for i in rows}), len(rows), proposers[a].name,
                    proposers[b].name, mean(base), mean(alt), mean(diffs),
                    _clustered_se(diffs, [where[i] for i in rows])))
    return cells


def prompts_for_se(cell: PairedCell, wanted_se: float) -> int | None:
    """Held-out prompts the paired difference of `cell` needs for a standard error of `wanted_se`.

    Prompts are the independent units (the s.e. is clustered by prompt), so
    the s.e. falls as 1/sqrt(prompts): from the spread measured over
    `cell.prompts` prompts, n = ceil(prompts * (s.e. / wanted)^2). None when
    the spread is unknown (fewer than two prompts) or `wanted_se` is not positive.
    """
    if not (wanted_se > 0) or cell.prompts < 2 or math.isnan(cell.difference_se):
        return None
    return max(2, math.ceil(cell.prompts * (cell.difference_se / wanted_se) ** 2))


PAIRED_COLUMNS = (
    Column("T", "temperature", "g"), Column("budget", "budget", "d"), Column("prompts", "prompt_set"),
    Column("n", "prompts", "d"), Column("positions", "positions", "d"), Column("E(A)", "baseline_length", ".3f"),
    Column("E(B)", "other_length", ".3f"), Column("B - A", "difference", "+.3f"),
    Column("%", lambda c: 100 * c["difference"] / c["baseline_length"], "+.1f"),
    Column("s.e. %", lambda c: 100 * c["difference_se"] / c["baseline_length"], ".1f"))
CELL_COLUMNS = (
    Column("T", "temperature", "g"), Column("budget", "budget", ">"), Column("prompts", "prompt_set"),
    Column("n", "prompts", "d"), Column("rounds", "rounds", "d"), Column("E=1+C", "expected_length", ".3f"),
    Column("(s.e.)", lambda c: f"({c['expected_length_se']:.3f})", "s"), Column("E[L]", "mean_emitted", ".3f"))


def format_paired(cells: list[PairedCell]) -> str:
    """One table per (A, B) pair, in the order the pairs first appear."""
    by_pair: dict[tuple[str, str], list[PairedCell]] = defaultdict(list)
    for cell in cells:
        by_pair[(cell.baseline, cell.other)].append(cell)
    return "\n\n".join(f"baseline A = {a}; B = {b}; same round starts, one target forward for all drafters\n"
                       + tabulate_rows(cells_to_json(group), PAIRED_COLUMNS) for (a, b), group in by_pair.items())


def format_table(cells: list[EvalCell]) -> str:
    return tabulate_rows(cells_to_json(cells), CELL_COLUMNS)


def cells_to_json(cells: list[EvalCell] | list[PairedCell]) -> list[dict]:
    return [asdict(c) for c in cells]
