"""`python -m tevcore eval-drafter`: E and mean block length of a drafter on held-out prompts (or two, paired).

Under `torchrun --nproc-per-node N -m tevcore -- eval-drafter ...` the ranks
share the prompts and rank 0 prints the one table and writes the one JSON.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch

from tevcore.outputs import write_json, written
from tevcore.proposers import default_drafter_path
from tevcore.proposers.flags import add_proposer_arguments, proposer_from_args, proposer_options
from tevcore.proposers.lookup import SUFFIX as LOOKUP_SUFFIX
from tevcore.proposers.registry import proposer_specs
from tevcore.ranks import device_for_rank, is_first, world
from tevcore.flags import add_target_arguments, count_at_least_one, seed_value, target_from_args, thread_count
from tevcore.parsing import budget_or_chain, comma_list
from tevcore.train.eval import (
    BUDGETS,
    MIX,
    cells_to_json,
    eval_prompts,
    evaluate,
    format_paired,
    format_table,
    oracle_ceilings,
    paired_coverage,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("drafter", nargs="?", default=None,
                        help=f"the proposer to evaluate: {proposer_specs()}; default: assets/drafter")
    add_target_arguments(parser)
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="e.g. chain,4,8,16,32")
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--greedy-sets", default="humaneval", help="held-out sets at T = 0")
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
    parser.add_argument("--compare", default=None, metavar="OTHER",
                        help="instead: score this drafter (A) and OTHER (B, any proposer spec) at the same round starts "
                             "of one autoregressive decode, and report B - A with its standard error")
    parser.add_argument("--by-set", action="store_true", help="also report each held-out set's share of the prompts")
    parser.add_argument("--json", type=Path, default=None, help="write the cells here")


def run(args: argparse.Namespace) -> int:
    options = proposer_options(args)
    budgets = comma_list(args.budgets, budget_or_chain, "budgets (or 'chain')")
    if args.compare and (args.oracle or "chain" in budgets):
        raise ValueError("--compare scores best-first trees of numbered budgets; drop 'chain' and --oracle")
    plan = []  # (temperature, prompts): every set read before the model loads
    for temperature in comma_list(args.temperatures, float, "temperatures"):
        sets = args.greedy_sets if temperature == 0 else args.sample_sets
        plan.append((temperature, eval_prompts(tuple(comma_list(sets, str, "prompt sets")), args.per_set)))
    torch.set_num_threads(args.threads)
    target = target_from_args(args, device=device_for_rank(args.device))
    spec = args.drafter or str(default_drafter_path())

    def proposer_for(spec: str):
        return proposer_from_args(args, target, replace(options, name=spec),
                                  spec + (LOOKUP_SUFFIX if args.lookup else ""))

    proposer = proposer_for(spec)
    other = proposer_for(args.compare) if args.compare else None
    cells, start = [], time.time()
    for temperature, prompts in plan:
        if other is not None:
            cells += paired_coverage(target, proposer, other, prompts, temperature, budgets, args.max_new_tokens,
                                     args.seed, by_set=args.by_set)
            continue
        cells += evaluate(target, proposer, prompts, temperature, budgets, args.max_new_tokens, args.seed,
                          by_set=args.by_set)
        sizes = [b for b in budgets if b != "chain"]
        if args.oracle and sizes:
            cells += oracle_ceilings(target, prompts, temperature, sizes, args.max_new_tokens, args.seed)
    if not is_first():
        return 0
    print(format_paired(cells) if other is not None else format_table(cells))
    if args.json:
        record = {"drafter": spec, "compare": args.compare, "proposer": proposer.name, "target": target.name, "greedy_sets": args.greedy_sets,
                  "sample_sets": args.sample_sets, "per_set": args.per_set, "max_new_tokens": args.max_new_tokens,
                  "seed": args.seed, "verifier": "tev", "threads": args.threads, "device": str(target.device), "processes": world()[1],
                  "machine": platform.machine(), "seconds": round(time.time() - start, 1),
                  "cells": cells_to_json(cells)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        print(written(write_json(args.json, record, overwrite=args.force), args.json))
    return 0
