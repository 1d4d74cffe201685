"""The caps applied to each kind of request, where the work is asked for (not only at the widget).

Each check takes the server's `Limits` and the request's own values and raises `CapExceeded` (one line naming
the cap) before any model work starts. The pages call them right before the engine; the engine itself stays
free of any server policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from tevcore.config import DecodeConfig
from tevcore.room.limits import Limits


def check_decode(limits: Limits, config: DecodeConfig) -> DecodeConfig:
    """A generation: its tree budget and the tokens it may emit."""
    limits.check("budget", config.budget, "tree budget")
    limits.check("new_tokens", config.max_new_tokens, "max new tokens")
    return config


def check_sampled(limits: Limits, rounds: int, budget: int) -> None:
    """Fresh sampled trees at one context (each keeps its nodes' full-vocabulary logits)."""
    limits.check("sampled_rounds", rounds, "sampled rounds")
    limits.check("sampled_budget", budget, "sampled tree budget")


def check_toy_rounds(limits: Limits, rounds: int, budget: int) -> None:
    """Fresh sampled trees at one context of the toy target (a dozen-token vocabulary: cheap rows, many rounds)."""
    limits.check("toy_rounds", rounds, "toy sampled rounds")
    limits.check("sampled_budget", budget, "sampled tree budget")


def check_draws(limits: Limits, draws: int) -> None:
    limits.check("draws", draws, "draws per verifier")


def check_coupling(limits: Limits, rounds: int) -> None:
    limits.check("coupling_rounds", rounds, "coupling rounds")


def check_compare(limits: Limits, budgets: Sequence[int], prompts: int, tokens: int, drafters: int) -> None:
    """A drafter evaluation: how many budgets and how large, prompts per set, tokens per prompt, drafters."""
    limits.check("compare_budgets", len(budgets), "number of budgets")
    numeric = [b for b in budgets if isinstance(b, int)]
    if numeric:
        limits.check("compare_budget", max(numeric), "budget")
    limits.check("prompts", prompts, "prompts per set")
    limits.check("new_tokens", tokens, "max new tokens")
    limits.check("compare_drafters", drafters, "drafters compared")


def check_training(limits: Limits, steps: int, batch: int) -> None:
    limits.check("train_steps", steps, "training steps")
    limits.check("train_batch", batch, "batch size")


def check_data(limits: Limits, shards: int) -> None:
    limits.check("data_shards", shards, "shards")
