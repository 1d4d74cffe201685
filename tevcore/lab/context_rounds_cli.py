"""`tevcore rounds-at-context`: many fresh sampled trees at one context of a real decode, every valid rule on them.

For an engineer's own target and drafter: is each rule exact over the draw
of the tree here (the first emitted token against the target's row), and
what does each reach (E[L]) beside 1 + C of the same trees and beside the
fixed best-first tree of the same drafter and budget. The context is the
prompt, or where `--at-round K` rounds of the decoding loop left it.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from itertools import islice

import torch

from tevcore.config import DecodeConfig
from tevcore.decoding.loop import prompt_ids, rounds
from tevcore.engine.records import round_context
from tevcore.flags import (add_target_arguments, count_at_least_one, prompt_text, seed_value, target_from_args,
                           thread_count)
from tevcore.lab.context_rounds import rounds_at_context, sampled_builder
from tevcore.lab.simulate import verify_rounds
from tevcore.outputs import write_json, written
from tevcore.parsing import comma_list
from tevcore.proposers import DRAFTER_DTYPE_HELP, parse_drafter_dtype, proposer_specs, resolve_proposer
from tevcore.verify.laws import standing
from tevcore.verify.verifiers import check_pairing, rules_for

DEFAULT_BUILDER = "sampled:2,1,1,1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompt", required=True, type=prompt_text,
                        help="user prompt (chat template applied unless --no-chat)")
    parser.add_argument("--no-chat", action="store_true", help="feed the prompt as raw text")
    parser.add_argument("--at-round", type=int, default=0,
                        help="decode this many rounds first (best_first + tev at --budget, --temperature, --seed) "
                             "and draw at the context they leave; 0 = the prompt's own context")
    parser.add_argument("--proposer", default="default", help=proposer_specs())
    parser.add_argument("--drafter-dtype", default="auto", help=DRAFTER_DTYPE_HELP)
    parser.add_argument("--builder", default=DEFAULT_BUILDER,
                        help="sampled:K1,K2,... (i.i.d. draws) or sampled-wor:K1,K2,... (without replacement), or "
                             "mixed:K1,K2,... / mixed-wor:K1,K2,... (each node's top-1 child fixed, K - 1 drawn)")
    parser.add_argument("--budget", type=count_at_least_one, default=16, help="node budget of every tree")
    parser.add_argument("--temperature", type=float, default=1.0, help="the trees' draws and the target's rows")
    parser.add_argument("--rounds", type=count_at_least_one, default=200, help="fresh trees to draw")
    parser.add_argument("--verifiers", default=None,
                        help="comma-separated rules (default: every rule the registry pairs with --builder)")
    parser.add_argument("--seed", type=seed_value, default=0, help="seed of the draws and of the verdicts")
    parser.add_argument("--threads", type=thread_count, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--out", default=None, help="also write the table as JSON here")
    add_target_arguments(parser)


def _rules(args: argparse.Namespace) -> list[str]:
    names = rules_for(args.builder) if args.verifiers is None else comma_list(args.verifiers, str, "verifiers")
    for name in names:
        check_pairing(name, args.builder)
    return names


def run(args: argparse.Namespace) -> int:
    sampled_builder(args.builder, args.budget, args.rounds)
    names = _rules(args)
    if args.at_round < 0:
        raise ValueError(f"--at-round must be 0 or more, got {args.at_round}")
    config = DecodeConfig(temperature=args.temperature, budget=args.budget, builder="best_first", verifier="tev",
                          seed=args.seed, chat=not args.no_chat)  # bad settings refused before the model loads
    if args.threads:
        torch.set_num_threads(args.threads)
    target = target_from_args(args)
    proposer = resolve_proposer(args.proposer, target, parse_drafter_dtype(args.drafter_dtype))
    config = replace(config, max_new_tokens=max(1, args.at_round * (proposer.depth + 1)))  # room for every round
    ids = prompt_ids(target, args.prompt, chat=config.chat)
    earlier = list(islice(rounds(target, proposer, ids, config), args.at_round))
    if len(earlier) < args.at_round:
        raise ValueError(f"--at-round {args.at_round}: the decode ended after {len(earlier)} rounds")
    context = round_context(ids, earlier, args.at_round)
    drawn = rounds_at_context(target, proposer, context, args.builder, args.budget, args.temperature, args.rounds,
                              args.seed)
    found = verify_rounds(names, drawn.rounds, args.temperature, args.seed)
    rows = [{"verifier": name, "standing": standing(name, args.temperature), **result.summary(drawn.context_probs)}
            for name, result in found.items()]
    print(f"{args.rounds} trees of {args.builder} (budget {args.budget}, T = {args.temperature:g}) by "
          f"{proposer.name} at a context of {len(context)} tokens; fixed best-first tree of "
          f"{drawn.best_first[0].size} nodes: 1 + C = {drawn.best_first_length:.3f}")
    print(format_table(rows))
    if args.out:
        meta = {"target": target.name, "proposer": proposer.name, "prompt": args.prompt, "at_round": args.at_round,
                "context_length": len(context), "builder": args.builder, "budget": args.budget,
                "temperature": args.temperature, "rounds": args.rounds, "seed": args.seed,
                "best_first_size": drawn.best_first[0].size, "best_first_length": drawn.best_first_length,
                "decode_config": {k: v for k, v in asdict(config).items() if k != "stop_tokens"}}
        print(written(write_json(args.out, {"meta": meta, "rows": rows}, overwrite=args.force), args.out))
    return 0


def format_table(rows: list[dict]) -> str:
    """One line per rule: how it stands to the target, E[L] and E[1 + C] of the same trees and their gap (each
    ± s.e.), and the first token's χ² p-value (tiny only where the standing says the rule is not this target's)."""
    lines = [f"{'verifier':<13}{'standing':<23}{'E[L]':>10}{'E[1 + C]':>16}{'gap':>16}{'first token p':>15}"]
    for row in rows:
        lines.append(f"{row['verifier']:<13}{row['standing']:<23}"
                     f"{row['mean_block_length']:>7.3f} ± {row['mean_block_length_se']:<4.3f}"
                     f"{row['mean_expected_length']:>9.3f} ± {row['mean_expected_length_se']:<4.3f}"
                     f"{row['gap']:>+9.3f} ± {row['gap_se']:<4.3f}{row['first_token_p']:>15.3g}")
    return "\n".join(lines)
