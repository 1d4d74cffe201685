"""The caps applied to each kind of request, where the work is asked for (not only at the widget).

Each check takes the server's `Limits` and the request's own values and raises `CapExceeded` (one line naming
the cap) before any model work starts. The pages call them right before the engine; the engine itself stays
free of any server policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from tevcore.config import DecodeConfig
from tevcore.room.limits import MB, CapExceeded, Limits
from tevcore.train.config import TrainConfig


def check_decode(limits: Limits, config: DecodeConfig) -> DecodeConfig:
    """A generation: its tree budget and the tokens it may emit."""
    limits.check("budget", config.budget, "tree budget")
    limits.check("new_tokens", config.max_new_tokens, "max new tokens")
    return config


def check_sampled(limits: Limits, rounds: int, budget: int) -> None:
    """Fresh sampled trees at one context (each one target forward; what they keep is `check_memory`'s)."""
    limits.check("sampled_rounds", rounds, "sampled rounds")
    limits.check("sampled_budget", budget, "sampled tree budget")


def check_toy_rounds(limits: Limits, rounds: int, budget: int) -> None:
    """Fresh sampled trees at one context of the toy target (a dozen-token vocabulary: cheap rows, many rounds)."""
    limits.check("toy_rounds", rounds, "toy sampled rounds")
    limits.check("sampled_budget", budget, "sampled tree budget")


def check_memory(limits: Limits, kept_bytes: int, what: str) -> None:
    """What a request will keep in the participant's session (an estimate made before the work, or the bytes a
    draw holds so far), against the memory budget: one line naming the budget and the request's size."""
    if kept_bytes > limits.session_bytes:
        raise CapExceeded(f"{what} would keep about {kept_bytes / MB:,.1f} MB, over this server's memory budget of "
                          f"{limits.session_bytes / MB:,.1f} MB per request (session_bytes)")


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


# every TrainConfig field that sizes a run's memory, time or disk, and the cap that bounds it
TRAIN_CAPS = {"steps": "train_steps", "batch_size": "train_batch", "tree_budget": "train_tree_budget",
              "tree_anchors": "train_tree_anchors", "tree_share": "train_tree_anchors",  # as anchors per step
              "tree_pool": "train_tree_pool", "checkpoint_every": "train_checkpoints",  # as checkpoints per run
              "threads": "train_threads", "depth": "train_depth", "context": "train_context",
              "draft_vocab": "train_draft_vocab", "layers": "train_layers", "heads": "train_heads", "ffn": "train_ffn",
              "probe_every": "train_checkpoints"}  # as gradient probes per run (each costs about a step)
# the fields that size nothing (rates, weights, switches, a seed) or name a folder or model the page offers
UNSIZED_TRAIN_FIELDS = frozenset({"data", "target", "init", "dropout", "lr", "min_lr_ratio", "warmup", "weight_decay",
                                  "grad_clip", "seed", "known_prob", "anchor_loss", "tree_lambda", "tree_weight",
                                  "tree_alpha", "tree_temperature", "tree_norm", "max_shards", "keep_checkpoints",
                                  "known_depth"})  # below the capped depth


def check_training(limits: Limits, config: TrainConfig) -> TrainConfig:
    """A training run: every field that sizes it (`TRAIN_CAPS`), the checkpoint interval as the checkpoints the
    run writes, the probe interval as the gradient probes it takes and the tree anchors as those a step scores."""
    sized = {"tree_anchors": config.tree_anchor_count, "tree_share": config.tree_anchor_count,
             "checkpoint_every": -(-config.steps // config.checkpoint_every),
             "probe_every": -(-config.steps // config.probe_every) if config.probe_every else None}
    for name, cap in TRAIN_CAPS.items():
        value = sized.get(name, getattr(config, name))
        if value is not None:
            what = {"tree_anchors": "tree anchors per step", "tree_share": "tree anchors per step",
                    "checkpoint_every": f"checkpoints ({config.steps} steps, one every {config.checkpoint_every})",
                    "probe_every": f"gradient probes ({config.steps} steps, one every {config.probe_every})",
                    }.get(name, name.replace("_", " "))
            limits.check(cap, value, what)
    return config


def check_data(limits: Limits, shards: int) -> None:
    limits.check("data_shards", shards, "shards")
