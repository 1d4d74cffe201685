"""`python -m tevcore eval-drafter`: E and mean block length of a drafter on held-out prompts (or two, paired).

Under `torchrun --nproc-per-node N -m tevcore -- eval-drafter ...` the ranks
share the prompts and rank 0 prints the one table and writes the one JSON.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from tevcore.results import ResultRecord, RunMeta, write_result
from tevcore.proposers import default_drafter_path
from tevcore.proposers.flags import add_proposer_arguments, proposer_from_args, proposer_options
from tevcore.proposers.lookup import SUFFIX as LOOKUP_SUFFIX
from tevcore.proposers.registry import proposer_specs
from tevcore.ranks import device_for_rank, is_first, world
from tevcore.flags import add_target_arguments, count_at_least_one, seed_value, target_from_args, thread_count
from tevcore.parsing import budget_or_chain, comma_list
from tevcore.train.eval import (
    BUDGETS,
    GREEDY_SETS,
    MIX,
    cells_to_json,
    eval_prompts,
    evaluate,
    format_paired,
    format_table,
    oracle_ceilings,
    prompt_sets,
    shared_start_coverage,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("drafter", nargs="?", default=None,
                        help=f"the proposer to evaluate: {proposer_specs()}; default: assets/drafter")
    add_target_arguments(parser)
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="e.g. chain,4,8,16,32")
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--greedy-sets", default=",".join(GREEDY_SETS), help="held-out sets at T = 0")
    parser.add_argument("--sample-sets", default=",".join(MIX), help="held-out sets at T > 0")
    parser.add_argument("--per-set", type=count_at_least_one, default=6, help="held-out prompts per set")
    parser.add_argument("--max-new-tokens", type=count_at_least_one, default=64)
    parser.add_argument("--seed", type=seed_value, default=0)
    parser.add_argument("--threads", type=thread_count, default=1)
    parser.add_argument("--lookup", action="store_true", help="mix in the context lookup (as the default proposer does)")
    add_proposer_arguments(parser, spec=False)
    parser.add_argument("--oracle", action="store_true",
                        help="also measure the ceiling: 1 + C of the best B-node tree under the target's own law "
                             "(one target forward per node, so slow)")
    parser.add_argument("--compare", default=None, nargs="+", action="extend", metavar="OTHER",
                        help="instead: score this drafter (A) and each OTHER (any proposer spec) at the same round "
                             "starts of one autoregressive decode (one target forward per position for them all), "
                             "and report each OTHER - A with its standard error")
    parser.add_argument("--pairs", default=None, metavar="A:B,...",
                        help="with --compare: the differences to report, B - A for each A:B, numbering this drafter 0 "
                             "and the --compare drafters 1, 2, ... in order (default: 0:1,0:2,...)")
    parser.add_argument("--by-set", action="store_true", help="also report each held-out set's share of the prompts")
    parser.add_argument("--json", default=None, help="write the cells here (a file name)")


def paired_argv(baseline: str, other: str, budgets: list[int], per_set: int, temperature: float,
                max_new_tokens: int, lookup: bool) -> list[str]:
    """The `eval-drafter --compare` command line for these settings (the app shows it beside its own paired
    comparison), with the default sets of `temperature`; parsed by this command's own parser before it is
    returned, so a flag renamed here cannot leave a command line that no longer runs."""
    sets_flag = "--greedy-sets" if temperature == 0 else "--sample-sets"
    argv = [baseline, "--compare", other, "--budgets", ",".join(map(str, budgets)), "--temperatures",
            f"{temperature:g}", sets_flag, ",".join(prompt_sets(temperature)), "--per-set", str(per_set),
            "--max-new-tokens", str(max_new_tokens)] + (["--lookup"] if lookup else [])
    parser = argparse.ArgumentParser(prog="python -m tevcore eval-drafter", exit_on_error=False)
    add_arguments(parser)
    parser.parse_args(argv)
    return ["python", "-m", "tevcore", "eval-drafter", *argv]


def _index_pair(item: str) -> tuple[int, int]:
    a, colon, b = item.partition(":")
    if not (colon and a.isdigit() and b.isdigit()):
        raise ValueError("A:B, two drafter numbers")
    return int(a), int(b)


def compared_pairs(text: str | None, compared: int) -> list[tuple[int, int]]:
    """The --pairs list as (A, B) index pairs, each checked against the `compared` drafters before anything loads;
    without --pairs, every compared drafter against drafter 0."""
    if text is None:
        return [(0, k) for k in range(1, compared + 1)]
    if not compared:
        raise ValueError("--pairs needs --compare (the drafters its numbers name)")
    pairs = comma_list(text, _index_pair, "A:B pairs")
    for a, b in pairs:
        if a == b or max(a, b) > compared:
            raise ValueError(f"--pairs: {a}:{b} must name two different drafters from 0 (this drafter) to "
                             f"{compared} (the last --compare drafter)")
    if len(set(pairs)) < len(pairs):
        raise ValueError(f"--pairs: a pair is given twice in {text!r}")
    return pairs


def prompt_plan(args: argparse.Namespace) -> list[tuple[float, list]]:
    """(temperature, prompts) per temperature: the greedy sets at T = 0, the sampled ones above; every set is read
    here, before any model loads, so a bad set name costs nothing."""
    plan = []
    for temperature in comma_list(args.temperatures, float, "temperatures"):
        sets = args.greedy_sets if temperature == 0 else args.sample_sets
        plan.append((temperature, eval_prompts(tuple(comma_list(sets, str, "prompt sets")), args.per_set)))
    return plan


def load_for_run(args: argparse.Namespace) -> tuple:
    """The target on this rank's device, at the asked thread count, and the run's meta block."""
    torch.set_num_threads(args.threads)
    target = target_from_args(args, device=device_for_rank(args.device))
    return target, RunMeta.now(args.command_line, device=str(target.device), seed=args.seed)


def run(args: argparse.Namespace) -> int:
    options = proposer_options(args)
    budgets = comma_list(args.budgets, budget_or_chain, "budgets (or 'chain')")
    if args.compare and (args.oracle or "chain" in budgets):
        raise ValueError("--compare scores best-first trees of numbered budgets; drop 'chain' and --oracle")
    pairs = compared_pairs(args.pairs, len(args.compare or []))
    plan = prompt_plan(args)
    target, meta = load_for_run(args)
    spec = args.drafter or str(default_drafter_path())

    def proposer_for(spec: str):
        return proposer_from_args(args, target, replace(options, name=spec),
                                  spec + (LOOKUP_SUFFIX if args.lookup else ""))

    proposer = proposer_for(spec)
    others = [proposer_for(other) for other in args.compare or []]
    cells, start = [], time.time()
    for temperature, prompts in plan:
        if others:
            cells += shared_start_coverage(target, [proposer, *others], pairs, prompts, temperature, budgets,
                                           args.max_new_tokens, args.seed, by_set=args.by_set)
            continue
        cells += evaluate(target, proposer, prompts, temperature, budgets, args.max_new_tokens, args.seed,
                          by_set=args.by_set)
        sizes = [b for b in budgets if b != "chain"]
        if args.oracle and sizes:
            cells += oracle_ceilings(target, prompts, temperature, sizes, args.max_new_tokens, args.seed)
    if not is_first():
        return 0
    print(format_paired(cells) if others else format_table(cells))
    if args.json:
        settings = {"drafter": spec, "compare": args.compare, "pairs": pairs, "proposer": proposer.name, "model": target.name,
                    "greedy_sets": args.greedy_sets, "sample_sets": args.sample_sets, "per_set": args.per_set,
                    "max_new_tokens": args.max_new_tokens, "verifier": "tev", "processes": world()[1]}
        record = ResultRecord("eval-drafter", meta, cells_to_json(cells), settings=settings,
                              summary={"seconds": round(time.time() - start, 1)})
        write_result(args.json, record, force=args.force)
    return 0
