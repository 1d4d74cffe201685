"""Caps on everything a request can size, in memory or in time: one typed object, two profiles.

Every service that does work checks its request against a `Limits` value before it starts, so a page's widget
is a convenience, not the guard: a request past a cap is refused with `CapExceeded`, a one-line reason that
names the cap and its value. The single-user profile is generous (a person on their own machine); the room
profile keeps one participant's click from holding the server's memory or the queue for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


class CapExceeded(ValueError):
    """A request past one of the caps; its message is one line naming the cap."""


@dataclass(frozen=True)
class Limits:
    """The largest value each request may ask for; the field docs say what each sizes."""

    budget: int  # draft tree nodes per round (the tree forward and its logits grow with it)
    new_tokens: int  # tokens one generation may emit (the number of rounds and their records)
    sampled_rounds: int  # fresh sampled trees drawn at one context (each scored by the target in one forward)
    sampled_budget: int  # nodes per sampled tree
    toy_rounds: int  # fresh sampled trees drawn at one context of the toy target (rows of a dozen tokens)
    draws: int  # verifier draws per comparison
    coupling_rounds: int  # rounds of the workshop's coupling demonstration
    prompts: int  # held-out prompts per set in an evaluation
    compare_budgets: int  # budgets one Compare evaluates
    compare_budget: int  # the largest budget Compare evaluates
    compare_drafters: int  # drafters one Compare evaluates
    upload_bytes: int  # bytes of one uploaded file
    text_bytes: int  # bytes of decompressed text an uploaded trace may expand to
    train_steps: int  # steps of one training run
    train_batch: int  # anchors per training step
    train_tree_budget: int  # nodes of each tree the tree loss scores (one target tree forward per anchor)
    train_tree_anchors: int  # anchors per step that get a tree (extra ones, or the batch's share)
    train_tree_pool: int  # sequences whose target KV cache a run keeps for tree scoring (memory)
    train_checkpoints: int  # checkpoints one run writes (steps / checkpoint interval: disk and time)
    train_threads: int  # CPU threads of one training process
    train_depth: int  # the drafter's block depth
    train_context: int  # the drafter's context tokens
    train_draft_vocab: int  # the drafter's output vocabulary
    train_layers: int  # the drafter's encoder layers
    train_heads: int  # the drafter's attention heads
    train_ffn: int  # the drafter's MLP width
    data_shards: int  # shards one data build writes
    jobs: int  # background jobs (training, data builds) running at once on the server
    session_bytes: int  # bytes one request may keep for a participant's session (drawn trees, their rows)

    def check(self, name: str, value: float, what: str | None = None) -> None:
        """Refuse `value` when it is past the cap `name` (CapExceeded naming the cap, the value and the limit)."""
        cap = getattr(self, name)
        if value > cap:
            shown = f"{int(value)}" if float(value).is_integer() else f"{value:g}"
            raise CapExceeded(f"{what or name.replace('_', ' ')} {shown} is over this server's cap of {cap} ({name})")

    def with_caps(self, **caps: int) -> Limits:
        """These limits with some caps changed (a host's config file); an unknown name is a ValueError."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(caps) - known)
        if unknown:
            raise ValueError(f"no cap named {', '.join(unknown)}; the caps are {', '.join(sorted(known))}")
        bad = [name for name, value in caps.items() if not isinstance(value, int) or isinstance(value, bool)
               or value < 1]
        if bad:
            raise ValueError(f"caps must be positive whole numbers: {', '.join(sorted(bad))}")
        return replace(self, **caps)


MB = 1 << 20

SINGLE_USER = Limits(budget=512, new_tokens=1024, sampled_rounds=2000, sampled_budget=64, toy_rounds=5000,
                     draws=2_000_000, coupling_rounds=20_000, prompts=50, compare_budgets=8, compare_budget=512,
                     compare_drafters=8, upload_bytes=200 * MB, text_bytes=1 << 30, train_steps=1_000_000,
                     train_batch=4096, train_tree_budget=512, train_tree_anchors=4096, train_tree_pool=4096,
                     train_checkpoints=1_000_000, train_threads=256, train_depth=64, train_context=1024,
                     train_draft_vocab=1 << 20, train_layers=64, train_heads=256, train_ffn=1 << 16, data_shards=1000,
                     jobs=4, session_bytes=8 << 30)
ROOM = Limits(budget=64, new_tokens=128, sampled_rounds=200, sampled_budget=64, toy_rounds=1000, draws=200_000,
              coupling_rounds=5000, prompts=4, compare_budgets=3, compare_budget=64, compare_drafters=2,
              upload_bytes=5 * MB, text_bytes=50 * MB, train_steps=2000, train_batch=64, train_tree_budget=64,
              train_tree_anchors=32, train_tree_pool=64, train_checkpoints=20, train_threads=2, train_depth=8,
              train_context=32, train_draft_vocab=16384, train_layers=4, train_heads=16, train_ffn=4096, data_shards=8,
              jobs=1, session_bytes=256 * MB)
PROFILES = {"single": SINGLE_USER, "room": ROOM}
