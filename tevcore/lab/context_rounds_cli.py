"""`tevcore rounds-at-context`: many fresh sampled trees at one context of a real decode, every valid rule on them.

For an engineer's own target and drafter: is each rule exact over the draw
of the tree here (the first emitted token against the target's row), and
what does each reach (E[L]) beside 1 + C of the same trees and beside the
fixed best-first tree of the same drafter and budget. The context is the
prompt, or where `--at-round K` rounds of the decoding loop left it.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from itertools import islice

import torch

from tevcore.config import DecodeConfig
from tevcore.decoding.loop import prompt_ids, reserved_positions, rounds
from tevcore.engine.records import round_context
from tevcore.flags import (add_target_arguments, count_at_least_one, prompt_text, seed_value, target_from_args,
                           thread_count)
from tevcore.lab.ceilings import design_ceilings, format_ceilings
from tevcore.lab.context_rounds import check_sampled, rounds_at_context
from tevcore.lab.simulate import gap_text, verify_rounds
from tevcore.results import Column, ResultRecord, RunMeta, format_table as tabulate_rows, write_result
from tevcore.parsing import comma_list
from tevcore.engine.builder_specs import BuilderSpec, parse_builder, sampled_builder_help
from tevcore.proposers.flags import add_proposer_arguments, proposer_from_args, proposer_options
from tevcore.verify.registry import check_pairing, rules_for, standing

DEFAULT_BUILDER = "sampled:2,1,1,1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompt", required=True, type=prompt_text,
                        help="user prompt (chat template applied unless --no-chat)")
    parser.add_argument("--no-chat", action="store_true", help="feed the prompt as raw text")
    parser.add_argument("--at-round", type=int, default=0,
                        help="decode this many rounds first (best_first + tev at --budget, --temperature, --seed) "
                             "and draw at the context they leave; 0 = the prompt's own context")
    add_proposer_arguments(parser)
    parser.add_argument("--builder", default=DEFAULT_BUILDER, help="a builder whose trees are drawn: " + sampled_builder_help())
    parser.add_argument("--budget", type=count_at_least_one, default=16, help="node budget of every tree")
    parser.add_argument("--temperature", type=float, default=1.0, help="the trees' draws and the target's rows")
    parser.add_argument("--rounds", type=count_at_least_one, default=200, help="fresh trees to draw")
    parser.add_argument("--verifiers", default=None,
                        help="comma-separated rules (default: every rule the registry pairs with --builder)")
    parser.add_argument("--seed", type=seed_value, default=0, help="seed of the draws and of the verdicts")
    parser.add_argument("--threads", type=thread_count, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--out", default=None, help="also write the table as JSON here")
    add_target_arguments(parser)


def _rules(args: argparse.Namespace, builder: BuilderSpec) -> list[str]:
    names = rules_for(builder) if args.verifiers is None else comma_list(args.verifiers, str, "verifiers")
    for name in names:
        check_pairing(name, builder)
    return names


def run(args: argparse.Namespace) -> int:
    builder = parse_builder(args.builder, args.budget)
    check_sampled(builder, args.rounds)
    names = _rules(args, builder)
    options = proposer_options(args)
    if args.at_round < 0:
        raise ValueError(f"--at-round must be 0 or more, got {args.at_round}")
    config = DecodeConfig(temperature=args.temperature, budget=args.budget, builder="best_first", verifier="tev",
                          seed=args.seed, chat=not args.no_chat)  # bad settings refused before the model loads
    if args.threads:
        torch.set_num_threads(args.threads)
    target = target_from_args(args)
    meta = RunMeta.now(args.command_line, device=str(target.device), seed=args.seed)
    proposer = proposer_from_args(args, target, options)
    config = replace(config, max_new_tokens=max(1, args.at_round * (proposer.depth + 1)))  # room for every round
    ids = prompt_ids(target, args.prompt, chat=config.chat)
    _check_room(args.at_round, len(ids), reserved_positions(config.max_new_tokens, proposer.depth), proposer.depth,
                target.max_context)
    earlier = list(islice(rounds(target, proposer, ids, config), args.at_round))
    if len(earlier) < args.at_round:
        raise ValueError(f"--at-round {args.at_round}: the decode ended after {len(earlier)} rounds")
    context = round_context(ids, earlier, args.at_round)
    drawn = rounds_at_context(target, proposer, context, builder, args.budget, args.temperature, args.rounds,
                              args.seed)
    found = verify_rounds(names, drawn.rounds, args.temperature, args.seed)
    rows = [{"verifier": name, "standing": standing(name, args.temperature), **result.summary(drawn.context_probs)}
            for name, result in found.items()]
    print(f"{args.rounds} trees of {args.builder} (budget {args.budget}, T = {args.temperature:g}) by "
          f"{proposer.name} at a context of {len(context)} tokens; {drawn.size_note()}; the fixed tree's "
          f"1 + C = {drawn.best_first_length:.3f}")
    print(format_table(rows))
    ceilings = design_ceilings(drawn, "rrs" in names)
    for title, table in ceilings.items():
        print(f"\n{title}: per node, the design's ceiling (the best exact acceptance there) beside what the rule "
              "reached")
        print(format_ceilings(table))
    if args.out:
        settings = {"model": target.name, "proposer": proposer.name, "prompt": args.prompt, "at_round": args.at_round,
                    "context_length": len(context), "builder": args.builder, "budget": args.budget,
                    "temperature": args.temperature, "rounds": args.rounds,
                    "decode_config": {k: v for k, v in config.to_dict().items() if k != "stop_tokens"}}
        summary = {"best_first_size": drawn.best_first[0].size, "best_first_length": drawn.best_first_length,
                   "sampled_mean_size": drawn.sizes()[0], "ceilings": ceilings}
        write_result(args.out, ResultRecord("rounds-at-context", meta, rows, settings=settings, summary=summary),
                     force=args.force)
    return 0


def _check_room(at_round: int, prompt_tokens: int, reserve: int, depth: int, context: int) -> None:
    """Refuse, naming --at-round, a decode whose rounds cannot fit the model's context: the decoding loop
    reserves `reserve` positions (every token the rounds may emit, `depth + 1` a round, and one more path)."""
    if at_round and prompt_tokens + reserve > context:
        most = max(context - prompt_tokens - (depth + 1), 0) // (depth + 1)
        raise ValueError(f"--at-round {at_round}: {at_round} rounds may need {reserve} positions, which with the "
                         f"prompt's {prompt_tokens} tokens exceed the model's context of {context} tokens; give "
                         f"--at-round {most} or less")


COLUMNS = (Column("verifier", "verifier"), Column("standing", "standing"),
           Column("E[L]", lambda r: f"{r['mean_emitted']:.3f} ± {r['mean_emitted_se']:.3f}", "s"),
           Column("E[1 + C]", lambda r: f"{r['mean_expected_length']:.3f} ± {r['mean_expected_length_se']:.3f}", "s"),
           Column("gap", lambda r: gap_text(r["gap"], r["gap_se"]), "s"),
           Column("first token p", "first_token_p", ".3g"))


def format_table(rows: list[dict]) -> str:
    """One line per rule: how it stands to the target, E[L] and E[1 + C] of the same trees and their gap (each
    ± s.e.), and the first token's χ² p-value (tiny only where the standing says the rule is not this target's)."""
    return tabulate_rows(rows, COLUMNS)
