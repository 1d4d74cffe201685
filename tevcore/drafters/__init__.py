"""Drafters: given the committed context, propose K per-depth draft distributions."""

from .base import Proposer, GreedyRolloutProposer
from .block import (BlockDrafter, BlockDrafterConfig, BlockProposer, default_drafter_path, load_default_proposer,
                    load_drafter, save_drafter)

__all__ = ["Proposer", "GreedyRolloutProposer", "BlockDrafter", "BlockDrafterConfig", "BlockProposer",
           "default_drafter_path", "load_default_proposer", "load_drafter", "save_drafter"]


def resolve_proposer(spec: str, target) -> Proposer:
    """'default' -> the committed drafter (stand-in if none fits); 'rollout' -> the stand-in; else a drafter folder."""
    from pathlib import Path

    if spec == "default":
        return load_default_proposer(target)
    if spec == "rollout":
        return GreedyRolloutProposer()
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise ValueError(f"unknown proposer {spec!r}: use 'default', 'rollout' or a drafter folder")
    return BlockProposer(load_drafter(folder, target), name=f"block drafter ({folder})")
