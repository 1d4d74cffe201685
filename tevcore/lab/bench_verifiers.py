"""`bench-verifiers`: how long each verifier takes to decide, on real trees of the target.

Trees come from the target itself: best-first trees over the per-depth rows
of its greedy rollout (the stand-in proposer) at a few positions of a few
held-out MT-Bench prompts, each scored once in a tree forward (timed too).
The verifiers then decide on the same scored trees, interleaved in a
rotating order round by round so that drift in machine load hits all of
them alike. Reported: median decision latency per verifier and budget, and
the decision time as a fraction of that tree's forward.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

import torch

from tevcore.engine.builders import best_first
from tevcore.lab.datasets import load_prompts
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.flags import add_target_arguments, comma_list, target_from_args
from tevcore.engine.flow import target_flow
from tevcore.target.loading import Target, encode_prompt
from tevcore.engine.sampling import make_generator
from tevcore.target.session import TargetSession
from tevcore.timing import synchronize
from tevcore.engine.tree import DraftTree
from tevcore.verify.verifiers import VERIFIERS, get_verifier, verifier_label, verify_greedy

T_ = TypeVar("T_")


@dataclass(frozen=True)
class ScoredTree:
    """One real tree, its node logits and its median tree-forward time."""

    budget: int
    tree: DraftTree
    logits: torch.Tensor
    forward_s: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budgets", default="8,16,32,64", help="comma-separated tree budgets")
    parser.add_argument("--rounds", type=int, default=200, help="timed decisions per verifier and budget")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the decisions")
    parser.add_argument("--verifiers", default=",".join(VERIFIERS), help="comma-separated verifier names")
    parser.add_argument("--prompts", type=int, default=3, help="held-out MT-Bench prompts to take trees from")
    parser.add_argument("--positions", type=int, default=2, help="tree positions per prompt (greedy rounds apart)")
    parser.add_argument("--depth", type=int, default=8, help="rollout depth K of the stand-in proposer")
    add_target_arguments(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the decisions' random draws")
    parser.add_argument("--out", default="results/verifiers.json", help="JSON file for the results")


def _timed(action: Callable[[], T_], device: torch.device) -> tuple[T_, float]:
    """Result and wall time of one call, waiting for queued GPU work on both sides."""
    synchronize(device)
    start = time.perf_counter()
    result = action()
    synchronize(device)
    return result, time.perf_counter() - start


def _score(session: TargetSession, tree: DraftTree, repeats: int = 3) -> tuple[torch.Tensor, float]:
    """Node logits of `tree`, left scored in the session, and the median of `repeats` timed forwards."""
    times = []
    for _ in range(repeats):
        session.rollback()
        scores, seconds = _timed(lambda: session.score_tree(tree), session.device)
        times.append(seconds)
    return scores.logits, statistics.median(times)


def collect_trees(target: Target, prompts: list[str], budgets: list[int], positions: int,
                  depth: int) -> dict[int, list[ScoredTree]]:
    """Scored best-first trees per budget; between positions the session commits a greedy verdict."""
    proposer = GreedyRolloutProposer(depth=depth)
    trees: dict[int, list[ScoredTree]] = {budget: [] for budget in budgets}
    for prompt in prompts:
        session = TargetSession(target)
        session.prefill(encode_prompt(target, prompt), reserve=positions * (depth + 1) + 1)
        for _ in range(positions):
            depth_logq = proposer.propose(session)
            for budget in budgets:
                tree = best_first(session.root_token, depth_logq, budget)
                logits, forward_s = _score(session, tree)
                trees[budget].append(ScoredTree(budget, tree, logits, forward_s))
            verdict = verify_greedy(tree, logits, 0.0, make_generator(0, session.device))
            session.commit(verdict.path, verdict.bonus_token)  # the last budget's tree is still scored
    return trees


def time_decisions(trees: list[ScoredTree], names: list[str], rounds: int, temperature: float,
                   seed: int) -> dict[str, dict[str, list[float]]]:
    """Per verifier: decision seconds and their fractions of the tree's forward, round-robin interleaved."""
    device = trees[0].logits.device
    generator = make_generator(seed, device)
    out = {name: {"seconds": [], "fraction": []} for name in names}
    for name in names:  # warm-up: first calls pay one-off allocation costs
        get_verifier(name)(trees[0].tree, trees[0].logits, temperature, generator)
    for round_index in range(rounds):
        scored = trees[round_index % len(trees)]
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            verify = get_verifier(name)
            _, seconds = _timed(lambda: verify(scored.tree, scored.logits, temperature, generator), device)
            out[name]["seconds"].append(seconds)
            out[name]["fraction"].append(seconds / scored.forward_s)
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(trees: list[ScoredTree], timings: dict[str, dict[str, list[float]]],
              temperature: float) -> list[dict]:
    """One row per verifier for one budget: latency quantiles, ratio to TEV, share of the forward."""
    tev_median = statistics.median(timings["tev"]["seconds"]) if "tev" in timings else None
    flows = [target_flow(s.tree, s.logits, temperature) for s in trees]
    shared = {
        "budget": trees[0].budget,
        "trees": len(trees),
        "mean_nodes": statistics.mean(s.tree.size for s in trees),
        "mean_depth": statistics.mean(s.tree.max_depth for s in trees),
        "mean_parent_rows": statistics.mean(int(torch.unique(s.tree.parents[1:]).numel()) for s in trees),
        "mean_expected_length": statistics.mean(f.expected_length for f in flows),
        "forward_ms_median": 1e3 * statistics.median(s.forward_s for s in trees),
    }
    rows = []
    for name, timing in timings.items():
        median = statistics.median(timing["seconds"])
        rows.append({**shared, "verifier": name, "label": verifier_label(name),
                     "median_ms": 1e3 * median,
                     "p10_ms": 1e3 * _quantile(timing["seconds"], 0.1),
                     "p90_ms": 1e3 * _quantile(timing["seconds"], 0.9),
                     "vs_tev": median / tev_median if tev_median else None,
                     "median_fraction_of_forward": statistics.median(timing["fraction"])})
    return rows


def format_table(rows: list[dict]) -> str:
    header = (f"{'B':>4} {'nodes':>6} {'parents':>8} {'fwd ms':>8}  {'verifier':<38}{'median ms':>10}"
              f"{'p90 ms':>9}{'x tev':>7}{'% fwd':>8}")
    lines = [header, "-" * len(header)]
    for r in rows:
        ratio = f"{r['vs_tev']:.2f}" if r["vs_tev"] is not None else "-"
        lines.append(f"{r['budget']:>4} {r['mean_nodes']:>6.1f} {r['mean_parent_rows']:>8.1f} "
                     f"{r['forward_ms_median']:>8.1f}  {r['label']:<38}{r['median_ms']:>10.3f}{r['p90_ms']:>9.3f}"
                     f"{ratio:>7}{100 * r['median_fraction_of_forward']:>7.2f}%")
    return "\n".join(lines)


def goals(rows: list[dict]) -> dict:
    """The issue's targets at the largest budget: TEV <= 0.5 x residual, TEV <= 5% of the forward."""
    top = max(r["budget"] for r in rows)
    at_top = {r["verifier"]: r for r in rows if r["budget"] == top}
    if "tev" not in at_top:
        return {}
    out = {"budget": top, "tev_fraction_of_forward": at_top["tev"]["median_fraction_of_forward"],
           "tev_fraction_goal_met": at_top["tev"]["median_fraction_of_forward"] <= 0.05}
    if "residual" in at_top:
        ratio = at_top["tev"]["median_ms"] / at_top["residual"]["median_ms"]
        out.update(tev_over_residual=ratio, tev_over_residual_goal_met=ratio <= 0.5)
    return out


def _git_state() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": None}


def run(args: argparse.Namespace) -> int:
    budgets = comma_list(args.budgets, int, "budgets")
    if min(budgets) < 1:
        raise ValueError(f"budgets must be positive integers, got {args.budgets!r}")
    names = comma_list(args.verifiers, str, "verifiers")
    for name in names:
        get_verifier(name)
    if args.rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {args.rounds}")
    if args.threads:
        torch.set_num_threads(args.threads)
    target = target_from_args(args)
    prompts = [p.text for p in load_prompts("mt-bench", "heldout", args.prompts)]
    trees = collect_trees(target, prompts, budgets, args.positions, args.depth)
    rows = []
    for budget in budgets:
        timings = time_decisions(trees[budget], names, args.rounds, args.temperature, args.seed)
        rows.extend(summarise(trees[budget], timings, args.temperature))
    print(format_table(rows))
    met = goals(rows)
    print(json.dumps(met))
    meta = {**_git_state(), "model": target.name, "device": str(target.device), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "machine": platform.machine(), "processor": platform.processor(),
            "budgets": budgets, "rounds": args.rounds, "temperature": args.temperature, "prompts": args.prompts,
            "positions": args.positions, "proposer": GreedyRolloutProposer(args.depth).name, "builder": "best_first",
            "seed": args.seed, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "goals": met, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-verifiers", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
