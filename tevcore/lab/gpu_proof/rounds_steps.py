"""The proof's decoding steps: one round's stage shares, and T = 0 identity with transformers' generate.

Both run the project's one decoding loop (`decoding.loop.rounds` / `generate`)
with the DFlash proposer around a random drafter at the published Qwen3-8B
drafter's geometry, on the random Qwen3-8B-geometry target. The stage times
are the loop's own (`StageTimer`, which waits for the GPU at every stage
boundary); a round's time is the wall time of one step of the loop.
"""

from __future__ import annotations

from statistics import mean

import torch

from tevcore.config import SAMPLING_TEMPERATURE, DecodeConfig
from tevcore.decoding.autobudget import random_context
from tevcore.decoding.loop import generate, rounds
from tevcore.engine.records import STAGES
from tevcore.lab.gpu_proof.models import build_dflash, build_target
from tevcore.lab.gpu_proof.plans import QWEN3_8B, Plan
from tevcore.lab.gpu_proof.steps import release
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.target.tree_attention import TREE_SDPA
from tevcore.timing import seconds_of
from tevcore.verify.verifiers import EXACT_VERIFIERS

FORWARDS = ("draft", "tree_forward")  # the drafter's forward and the target's tree forward
OUTSIDE_GOAL = 0.05


def round_shares(plan: Plan, device: torch.device, out_dir) -> tuple[dict, list[dict], str]:
    """Per budget: mean milliseconds and share of the round per stage, over rounds after a warm-up round."""
    target = build_target(plan, QWEN3_8B, device)
    proposer = build_dflash(plan, target)
    prompt = random_context(target, plan.round_context)
    rows = []
    for budget in plan.round_budgets:
        config = DecodeConfig(max_new_tokens=(plan.rounds_per_budget + 2) * plan.dflash["block_size"],
                              temperature=SAMPLING_TEMPERATURE, budget=budget, verifier="tev", stop_tokens=(),
                              record="lean")
        loop = rounds(target, proposer, prompt, config)
        timed = [seconds_of(lambda: next(loop), device) for _ in range(plan.rounds_per_budget + 1)][1:]
        loop.close()
        records, walls = [r for r, _ in timed], [s for _, s in timed]
        round_s = mean(walls)
        stage_s = {stage: mean(getattr(r.timings, stage) for r in records) for stage in STAGES}
        rows.append({"geometry": QWEN3_8B, "drafter": proposer.name, "budget": budget, "rounds": len(records),
                     "round_ms": 1e3 * round_s, "mean_emitted": mean(r.emitted for r in records),
                     "outside_forwards_share": 1.0 - sum(stage_s[s] for s in FORWARDS) / round_s,
                     **{f"{s}_ms": 1e3 * stage_s[s] for s in STAGES},
                     **{f"{s}_share": stage_s[s] / round_s for s in STAGES}})
    summary = {"geometry": QWEN3_8B, "drafter": proposer.name, "goal_outside_forwards_share": OUTSIDE_GOAL,
               "goal_met": {str(r["budget"]): r["outside_forwards_share"] < OUTSIDE_GOAL for r in rows}}
    note = ("tev at T = 1 over a random context; a round's time is one step of the decoding loop, the stages are "
            "its own timer's; outside_forwards_share = 1 - (draft + tree_forward) / round")
    del target, proposer
    release(device)
    return summary, rows, note


def _reference_tokens(target, prompt: list[int], new_tokens: int) -> list[int]:
    """transformers' greedy generate with its own SDPA attention and cache (the independent reference)."""
    model = target.model
    model.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            ids = torch.tensor([prompt], device=target.device)
            out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        return out[0, len(prompt):].tolist()
    finally:
        model.set_attn_implementation(TREE_SDPA)


def _top2_gap(target, sequence: list[int]) -> float:
    """The reference's gap between its two best logits after `sequence` (a near tie explains a difference)."""
    with torch.inference_mode():
        logits = target.model(input_ids=torch.tensor([sequence], device=target.device)).logits[0, -1].float()
    best = logits.topk(2).values
    return float(best[0] - best[1])


def identity(plan: Plan, device: torch.device, out_dir) -> tuple[dict, list[dict], str]:
    """Greedy decoding of every exact verifier (DFlash drafts; and greedy-rollout drafts, which get accepted)
    against transformers' greedy generate, token for token, in float32."""
    target = build_target(plan, QWEN3_8B, device, dtype="float32")
    prompt = random_context(target, plan.identity_context, seed=3)
    expected = _reference_tokens(target, prompt, plan.identity_tokens)
    proposers = [(build_dflash(plan, target), EXACT_VERIFIERS), (GreedyRolloutProposer(depth=3), ("tev",))]
    rows = []
    for proposer, names in proposers:
        for index, verifier in enumerate(names):
            config = DecodeConfig(max_new_tokens=plan.identity_tokens, budget=16, verifier=verifier, seed=index,
                                  stop_tokens=(), record="lean")
            decoded = generate(target, proposer, prompt, config)
            differs = next((i for i, (a, b) in enumerate(zip(decoded.tokens, expected)) if a != b), None)
            if differs is None and len(decoded.tokens) != len(expected):
                differs = min(len(decoded.tokens), len(expected))
            rows.append({"geometry": QWEN3_8B, "proposer": proposer.name, "verifier": verifier,
                         "tokens": len(decoded.tokens), "identical": differs is None, "first_difference": differs,
                         "reference_top2_gap_there": None if differs is None else
                         _top2_gap(target, prompt + expected[:differs]),
                         "mean_emitted": mean(r.emitted for r in decoded.rounds)})
    summary = {"geometry": QWEN3_8B, "dtype": "float32", "new_tokens": plan.identity_tokens,
               "reference": "transformers generate(do_sample=False), sdpa attention, its own cache",
               "all_identical": all(r["identical"] for r in rows)}
    del target, proposers
    release(device)
    return summary, rows, "float32 so that a bf16 rounding near a tie cannot flip an argmax; random weights"

