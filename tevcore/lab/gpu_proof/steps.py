"""The proof's cost steps: the tree-forward cost curve and the verifier stage.

Each step returns (summary, rows, note) for `schema.write_step` (the CUDA test
lane is the harness's, in `scripts/gpu_cuda_tests.py`); the timer is
`timing.event_seconds_of` (CUDA events on a GPU, the one wall-clock timer
elsewhere), the tree forwards are `TargetSession.score_tree`, the trees
`autobudget.star_tree` (cost curve) and `builders.best_first` (verifiers),
and the verifier timing is bench-verifiers' own interleaved loop.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tevcore.config import SAMPLING_TEMPERATURE
from tevcore.decoding.autobudget import curve_from_timings, random_context, tree_forward_times
from tevcore.engine.builders import best_first
from tevcore.lab.bench_verifiers import ScoredTree, goals, summarise, time_decisions, timed_score
from tevcore.lab.gpu_proof.models import build_target
from tevcore.lab.gpu_proof.plans import QWEN3_8B, Plan
from tevcore.target.session import TargetSession
from tevcore.timing import event_seconds_of
from tevcore.verify.verifiers import EXACT_VERIFIERS

def release(device: torch.device) -> None:
    """Give a finished model's memory back before the next one is built."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def cost_curve(plan: Plan, device: torch.device, out_dir: Path) -> tuple[dict, list[dict], str]:
    """Per geometry and context: one tree forward of B drafted nodes (plus the root) against a one-token forward.

    Sizes take turns within each repeat; each size's cost is the median of its ratio to the one-token forward
    of the same repeat (`autobudget.curve_from_timings`), so a drifting clock shifts both alike."""
    rows = []
    for geometry in plan.geometries:
        target = build_target(plan, geometry, device)
        for context in plan.curve_contexts:
            session = TargetSession(target)
            session.prefill(random_context(target, context), reserve=max(plan.curve_nodes) + 2)
            times = tree_forward_times(session, list(plan.curve_nodes), plan.curve_repeats, event_seconds_of)
            curve = curve_from_timings(times)
            rows.extend({"geometry": geometry, "context": context, "nodes": nodes, "forward_ms": 1e3 * curve[nodes],
                         "ratio_to_one_token": curve[nodes] / curve[0]} for nodes in plan.curve_nodes)
        del target, session
        release(device)
    summary = {"geometries": list(plan.geometries), "contexts": list(plan.curve_contexts),
               "nodes": list(plan.curve_nodes), "repeats": plan.curve_repeats}
    return summary, rows, "random weights: costs only; nodes = drafted nodes, the root comes on top (0 = one token)"


def _peaked_tree(root: int, vocab: int, budget: int, seed: int, depth: int = 8):
    """A best-first tree over seeded peaked rows: branching and several levels deep, like a drafter's."""
    generator = torch.Generator().manual_seed(seed)
    return best_first(root, torch.log_softmax(3 * torch.randn(depth, vocab, generator=generator), -1), budget)


def verifiers(plan: Plan, device: torch.device, out_dir: Path) -> tuple[dict, list[dict], str]:
    """Every exact rule in the verifier registry at run time, on trees of the Qwen3-8B geometry's vocabulary:
    its decision given the round's flow and including the flow, against that tree's forward."""
    target = build_target(plan, QWEN3_8B, device)
    session = TargetSession(target)
    session.prefill(random_context(target, plan.round_context), reserve=max(plan.verifier_budgets) + 2)
    names = list(EXACT_VERIFIERS)
    rows = []
    for budget in plan.verifier_budgets:
        trees = []
        for index in range(plan.verifier_trees):
            tree = _peaked_tree(session.root_token, target.vocab_size, budget, seed=1000 * budget + index)
            logits, forward_s = timed_score(session, tree, timer=event_seconds_of)
            trees.append(ScoredTree(budget, "best_first", tree, logits, forward_s))
        timings = time_decisions(trees, names, plan.verifier_rounds, SAMPLING_TEMPERATURE, seed=budget,
                                 timer=event_seconds_of)
        rows.extend({"geometry": QWEN3_8B, "vocab": target.vocab_size, **row}
                    for row in summarise(trees, timings, SAMPLING_TEMPERATURE))
    summary = {"geometry": QWEN3_8B, "temperature": SAMPLING_TEMPERATURE, "rounds": plan.verifier_rounds,
               "rules": names, "goals": goals(rows)}
    return summary, rows, "trees from seeded peaked rows (best-first), logits of the random target"
