"""`python -m tevcore compare-designs`: tree designs (builder + rule) at the same contexts of one decode.

Each design's expected accepted length at every position of one
autoregressive decode per held-out prompt (exact for a fixed tree, averaged
over fresh draws for a drawn one), and its paired difference from the first
design with a standard error clustered by prompt (`tevcore.train.designs`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tevcore.flags import add_target_arguments, count_at_least_one, seed_value, thread_count
from tevcore.parsing import comma_list
from tevcore.proposers.flags import add_proposer_arguments, proposer_from_args, proposer_options
from tevcore.ranks import is_first
from tevcore.results import ResultRecord, write_result
from tevcore.train.designs import FIXED_FIRST, compare_designs, designs_to_json, format_designs, parse_design
from tevcore.train.eval import GREEDY_SETS, MIX
from tevcore.train.eval_cli import load_for_run, prompt_plan

DEFAULT_DESIGNS = ("best_first=tev", "sampled:2,1,1,1=rrs", f"mixed:2,1,1,1={FIXED_FIRST}", "mixed:2,1,1,1=rrs",
                   "policy:2,1,1,1=rrs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    add_proposer_arguments(parser)
    parser.add_argument("--design", dest="designs", action="append", default=None, metavar="BUILDER=RULE",
                        help="a design to compare (repeat the flag; the first is the baseline): a builder name and a "
                             f"rule the registry pairs with it, or {FIXED_FIRST} (rrs's earlier point-mass-first "
                             f"order) on a drawn builder; default: {' '.join(DEFAULT_DESIGNS)}")
    parser.add_argument("--budgets", default="8,16", help="node budgets, e.g. 8,16")
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--greedy-sets", default=",".join(GREEDY_SETS), help="held-out sets at T = 0")
    parser.add_argument("--sample-sets", default=",".join(MIX), help="held-out sets at T > 0")
    parser.add_argument("--per-set", type=count_at_least_one, default=6, help="held-out prompts per set")
    parser.add_argument("--max-new-tokens", type=count_at_least_one, default=64, help="positions per prompt")
    parser.add_argument("--draws", type=count_at_least_one, default=4,
                        help="fresh trees per position for a drawn design (their exact E[L | tree] averaged)")
    parser.add_argument("--seed", type=seed_value, default=0)
    parser.add_argument("--threads", type=thread_count, default=1)
    parser.add_argument("--by-set", action="store_true", help="also report each held-out set on its own")
    parser.add_argument("--all-pairs", action="store_true",
                        help="also the paired difference (s.e. clustered by prompt) between every two designs after "
                             "the first, not only each design's difference from the first")
    parser.add_argument("--json", type=Path, default=None, help="write the cells here")


def run(args: argparse.Namespace) -> int:
    designs = [parse_design(text) for text in (args.designs or DEFAULT_DESIGNS)]  # refused before any loading
    budgets = comma_list(args.budgets, int, "budgets")
    if any(b < 1 for b in budgets):
        raise ValueError(f"budgets must be at least 1 node, got {args.budgets}")
    for design in designs:
        if design.builder.family.check_budget is not None:
            for budget in budgets:
                design.builder.family.check_budget(design.builder.counts, budget)
    plan = prompt_plan(args)
    target, meta = load_for_run(args)
    proposer = proposer_from_args(args, target, proposer_options(args))
    for design in designs:
        design.builder.check_depth(proposer.depth)
    cells, start = [], time.time()
    for temperature, prompts in plan:
        cells += compare_designs(target, proposer, designs, prompts, temperature, budgets, args.draws,
                                 args.max_new_tokens, args.seed, by_set=args.by_set, all_pairs=args.all_pairs)
    if not is_first():
        return 0
    print(f"baseline: {designs[0].name}; every design at the same positions of one decode per prompt "
          f"({proposer.name}; drawn designs: {args.draws} fresh trees per position)")
    print(format_designs(cells))
    if args.json:
        settings = {"designs": [d.name for d in designs], "proposer": proposer.name, "model": target.name,
                    "budgets": budgets, "greedy_sets": args.greedy_sets, "sample_sets": args.sample_sets,
                    "per_set": args.per_set, "max_new_tokens": args.max_new_tokens, "draws": args.draws,
                    "all_pairs": args.all_pairs}
        write_result(args.json, ResultRecord("compare-designs", meta, designs_to_json(cells), settings=settings,
                                             summary={"seconds": round(time.time() - start, 1)}), force=args.force)
    return 0
