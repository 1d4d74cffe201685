"""`bench-verifiers`: how long each verifier takes to decide, on real trees of the target.

Trees come from the target itself: best-first trees over the per-depth rows
of its greedy rollout (the stand-in proposer) at a few positions of a few
held-out MT-Bench prompts, each scored once in a tree forward (timed too).
The verifiers then decide on the same scored trees, interleaved in a
rotating order round by round so that drift in machine load hits all of
them alike, in two ways: given the round's flow (what the decoding loop
hands them: it computed the flow for its record) and including the lean
flow they must compute alone. Reported: median decision latency of both per
verifier and budget, the ratio to the residual verifier and the decision
as a fraction of that tree's forward.

Sampled builders (`--builders`) draw their trees from the same rows at the
decisions' temperature, so the proposal-ratio rules (rrs, block) are timed
on the trees they verify, beside TEV and residual on those same trees.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.config import SAMPLING_TEMPERATURE
from tevcore.target.walker import walk
from tevcore.engine.builder_specs import BUILDER_FAMILIES, BuilderSpec, parse_builder_list
from tevcore.verify.registry import valid_pairs
from tevcore.lab.datasets import load_prompts
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.flags import add_target_arguments, count_at_least_one, seed_value, target_from_args, thread_count
from tevcore.parsing import comma_list
from tevcore.engine.flow import TargetFlow, target_flow
from tevcore.target.loading import Target, encode_prompt
from tevcore.engine.sampling import make_generator
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree
from tevcore.results import Column, ResultRecord, RunMeta, format_table as tabulate_rows, write_result
from tevcore.timing import seconds_of
from tevcore.verify.registry import RULES, verifier_label
from tevcore.verify.verifiers import get_verifier

MODES = ("given_flow", "including_flow")  # the flow handed in (as in decoding), or computed by the verifier
DEFAULT_BUILDERS = "best_first,sampled:4,2,2,1,1,1,1,1,sampled:1,1,1,1,1,1,1,1"


@dataclass(frozen=True)
class ScoredTree:
    """One real tree, its node logits and its median tree-forward time."""

    budget: int
    builder: str
    tree: DraftTree
    logits: torch.Tensor
    forward_s: float

    def lean_flow(self, temperature: float) -> TargetFlow:
        """What a verifier needs of the round's flow (no missing tokens)."""
        return target_flow(self.tree, self.logits, temperature, missing_k=0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budgets", default="8,16,32,64", help="comma-separated tree budgets")
    parser.add_argument("--rounds", type=count_at_least_one, default=200,
                        help="timed decisions per verifier and budget")
    parser.add_argument("--temperature", type=float, default=SAMPLING_TEMPERATURE,
                        help="sampling temperature of the decisions")
    parser.add_argument("--verifiers", default=",".join(RULES),
                        help="comma-separated verifier names; each is timed on the builders' trees it is exact on")
    parser.add_argument("--builders", default=DEFAULT_BUILDERS,
                        help="comma-separated builders of the timed trees (sampled ones draw at --temperature)")
    parser.add_argument("--prompts", type=count_at_least_one, default=3, help="held-out MT-Bench prompts to take trees from")
    parser.add_argument("--positions", type=count_at_least_one, default=2, help="tree positions per prompt (consecutive tokens of its greedy walk)")
    parser.add_argument("--depth", type=count_at_least_one, default=8, help="rollout depth K of the stand-in proposer")
    add_target_arguments(parser)
    parser.add_argument("--threads", type=thread_count, default=None,
                        help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--seed", type=seed_value, default=0, help="seed of the decisions' random draws")
    parser.add_argument("--out", default="results/verifiers.json", help="JSON file for the results")


def timed_score(session: TargetSession, tree: DraftTree, repeats: int = 3,
                timer: Callable = seconds_of) -> tuple[torch.Tensor, float]:
    """Node logits of `tree`, left scored in the session, and the median of `repeats` timed forwards
    (`timer` is `seconds_of` or another of its signature, such as CUDA events)."""
    times = []
    for _ in range(repeats):
        session.rollback()
        scores, seconds = timer(lambda: session.score_tree(tree), session.device)
        times.append(seconds)
    return scores.logits, statistics.median(times)


def collect_trees(target: Target, prompts: list[str], budgets: list[int], positions: int, depth: int,
                  builders: tuple[BuilderSpec, ...] = (BUILDER_FAMILIES["best_first"].spec(),),
                  temperature: float = SAMPLING_TEMPERATURE, seed: int = 0) -> dict[tuple[int, str], list[ScoredTree]]:
    """Scored trees per (budget, builder name) at the first `positions` positions of each prompt's greedy walk."""
    proposer = GreedyRolloutProposer(depth=depth)
    trees: dict[tuple[int, str], list[ScoredTree]] = {(b, spec.name): [] for b in budgets for spec in builders}
    made = {spec.name: spec for spec in builders}
    generator = make_generator(seed)

    def measure(session: TargetSession) -> torch.Tensor:
        depth_logq = proposer.propose(session)
        for budget in budgets:
            for name, build in made.items():
                tree = build(session.root_token, depth_logq, budget, temperature, generator)
                logits, forward_s = timed_score(session, tree)
                trees[(budget, name)].append(ScoredTree(budget, name, tree, logits, forward_s))
        return logits[0]  # the last tree stays scored; the walk commits its root's greedy token

    for prompt in prompts:
        session = TargetSession(target)
        session.prefill(encode_prompt(target, prompt), reserve=positions + depth + 1)
        walk(session, positions, 0.0, make_generator(0, session.device), set(), measure)
    return trees


def time_decisions(trees: list[ScoredTree], names: list[str], rounds: int, temperature: float,
                   seed: int, timer: Callable = seconds_of) -> dict[str, dict[str, list[float]]]:
    """Per verifier and mode: decision seconds (and fractions of the tree's forward), round-robin interleaved.

    Every verifier sees the same trees in the same rounds; the order of
    (verifier, mode) pairs rotates each round. `timer` is `seconds_of` or
    another of its signature (CUDA events on a GPU).
    """
    device = trees[0].logits.device
    generator = make_generator(seed, device)
    flows = [scored.lean_flow(temperature) for scored in trees]
    pairs = [(name, mode) for name in names for mode in MODES]
    out = {name: {key: [] for mode in MODES for key in (mode, mode + "_fraction")} for name in names}
    for name in names:  # warm-up: first calls pay one-off allocation costs
        get_verifier(name)(trees[0].tree, trees[0].logits, temperature, generator, flow=flows[0])
    for round_index in range(rounds):
        scored, flow = trees[round_index % len(trees)], flows[round_index % len(trees)]
        shift = round_index % len(pairs)
        for name, mode in pairs[shift:] + pairs[:shift]:
            verify, handed = get_verifier(name), flow if mode == "given_flow" else None
            _, seconds = timer(lambda: verify(scored.tree, scored.logits, temperature, generator, flow=handed), device)
            out[name][mode].append(seconds)
            out[name][mode + "_fraction"].append(seconds / scored.forward_s)
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(trees: list[ScoredTree], timings: dict[str, dict[str, list[float]]],
              temperature: float) -> list[dict]:
    """One row per verifier for one budget: median latencies in both modes, the median of its per-round
    ratios to residual's decision on the same tree, and its share of the tree's forward."""
    flows = [s.lean_flow(temperature) for s in trees]
    shared = {
        "budget": trees[0].budget,
        "builder": trees[0].builder,
        "trees": len(trees),
        "mean_nodes": statistics.mean(s.tree.size for s in trees),
        "mean_depth": statistics.mean(s.tree.max_depth for s in trees),
        "mean_parent_rows": statistics.mean(int(torch.unique(s.tree.parents[1:]).numel()) for s in trees),
        "mean_expected_length": statistics.mean(f.expected_length for f in flows),
        "forward_ms_median": 1e3 * statistics.median(s.forward_s for s in trees),
    }
    medians = {name: {mode: statistics.median(t[mode]) for mode in MODES} for name, t in timings.items()}
    rows = []
    for name, timing in timings.items():
        row = {**shared, "verifier": name, "label": verifier_label(name)}
        for mode in MODES:
            row[f"{mode}_median_ms"] = 1e3 * medians[name][mode]
            row[f"{mode}_p90_ms"] = 1e3 * _quantile(timing[mode], 0.9)
            row[f"{mode}_vs_residual"] = (statistics.median(
                mine / theirs for mine, theirs in zip(timing[mode], timings["residual"][mode]))
                if "residual" in timings else None)  # per-round pairs: the same tree, moments apart
            row[f"{mode}_fraction_of_forward"] = statistics.median(timing[mode + "_fraction"])
        rows.append(row)
    return rows


def _vs_residual(mode: str):
    return lambda r: f"{r[mode + '_vs_residual']:.2f}" if r[mode + "_vs_residual"] is not None else None


COLUMNS = (Column("B", "budget", "d"), Column("builder", "builder"), Column("nodes", "mean_nodes", ".1f"),
           Column("parents", "mean_parent_rows", ".1f"), Column("fwd ms", "forward_ms_median", ".1f"),
           Column("verifier", "label"), Column("given flow ms", "given_flow_median_ms", ".3f"),
           Column("x resid", _vs_residual("given_flow"), "s"),
           Column("incl. flow ms", "including_flow_median_ms", ".3f"),
           Column("x resid", _vs_residual("including_flow"), "s"),
           Column("% fwd", lambda r: 100 * r["including_flow_fraction_of_forward"], ".2f"))


def format_table(rows: list[dict]) -> str:
    return tabulate_rows(rows, COLUMNS)


def goals(rows: list[dict]) -> dict:
    """The issue's targets at the largest budget: TEV given the flow <= 0.5 x residual, including it <= 1 x."""
    top = max(r["budget"] for r in rows)
    at_top = {r["verifier"]: r for r in rows if r["budget"] == top and r["builder"] == "best_first"}
    if "tev" not in at_top or "residual" not in at_top:
        return {}
    given, including = at_top["tev"]["given_flow_vs_residual"], at_top["tev"]["including_flow_vs_residual"]
    return {"budget": top, "tev_over_residual_given_flow": given, "given_flow_goal_met": given <= 0.5,
            "tev_over_residual_including_flow": including, "including_flow_goal_met": including <= 1.0}


def run(args: argparse.Namespace) -> int:
    budgets = comma_list(args.budgets, int, "budgets")
    if min(budgets) < 1:
        raise ValueError(f"budgets must be positive integers, got {args.budgets!r}")
    names = comma_list(args.verifiers, str, "verifiers")
    for name in names:
        get_verifier(name)
    builders = parse_builder_list(args.builders)
    pairs = valid_pairs(builders, names)
    if args.rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {args.rounds}")
    if args.threads:
        torch.set_num_threads(args.threads)
    target = target_from_args(args)
    meta = RunMeta.now(args.command_line, device=str(target.device), seed=args.seed)
    prompts = [p.text for p in load_prompts("mt-bench", "heldout", args.prompts)]
    trees = collect_trees(target, prompts, budgets, args.positions, args.depth, tuple(builders), args.temperature,
                          args.seed)
    rows = []
    for budget in budgets:
        for builder in builders:
            timed = [name for made, name in pairs if made == builder]
            if timed:
                scored = trees[(budget, builder.name)]
                rows.extend(summarise(scored, time_decisions(scored, timed, args.rounds, args.temperature, args.seed),
                                      args.temperature))
    print(format_table(rows))
    met = goals(rows)
    print(json.dumps(met))
    settings = {"model": target.name, "budgets": budgets, "rounds": args.rounds, "temperature": args.temperature,
                "prompts": args.prompts, "positions": args.positions,
                "proposer": GreedyRolloutProposer(args.depth).name, "builders": [b.name for b in builders]}
    write_result(args.out, ResultRecord("bench-verifiers", meta, rows, settings=settings, summary={"goals": met}),
                 force=args.force)
    return 0
