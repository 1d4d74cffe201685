"""Drafters: given the committed context, propose K per-depth draft distributions."""

from .base import GreedyRolloutProposer, NoDrafter, Proposer
from .block import (BlockDrafter, BlockDrafterConfig, BlockProposer, default_drafter_path, load_default_proposer,
                    load_drafter, save_drafter)

__all__ = ["Proposer", "resolve_proposer", "PROPOSER_SPECS", "GreedyRolloutProposer", "NoDrafter", "BlockDrafter",
           "BlockDrafterConfig", "BlockProposer", "default_drafter_path", "load_default_proposer", "load_drafter",
           "save_drafter"]


LOOKUP_SUFFIX = "+lookup"
PROPOSER_SPECS = ("'default' (= 'drafter+lookup'), 'drafter', 'rollout', 'lookup' (the lookup without a drafter), "
                  "a drafter folder, or any of these + '+lookup'")


def resolve_proposer(spec: str, target) -> Proposer:
    """A proposer from its spec.

    'drafter' -> the committed drafter (the stand-in if none fits the target);
    'rollout' -> the stand-in; anything else -> a drafter folder. A '+lookup'
    suffix mixes in the context lookup; 'default' is 'drafter+lookup' and
    'lookup' the lookup over flat rows (no drafter).
    """
    from pathlib import Path

    from .lookup import ContextLookupProposer

    base = {"default": "drafter" + LOOKUP_SUFFIX, "lookup": "none" + LOOKUP_SUFFIX}.get(spec, spec)
    lookup = base.endswith(LOOKUP_SUFFIX)
    base = base[: -len(LOOKUP_SUFFIX)] if lookup else base
    if base == "drafter":
        proposer = load_default_proposer(target)
    elif base == "rollout":
        proposer = GreedyRolloutProposer()
    elif base == "none" and lookup:
        proposer = NoDrafter(target.vocab_size)
    else:
        folder = Path(base).expanduser()
        if not folder.is_dir():
            raise ValueError(f"unknown proposer {spec!r}: use {PROPOSER_SPECS}")
        proposer = BlockProposer(load_drafter(folder, target), name=f"block drafter ({folder})")
    return ContextLookupProposer(proposer) if lookup else proposer
