"""Drafters: given the committed context, propose K per-depth draft distributions."""

from .base import Proposer, GreedyRolloutProposer

__all__ = ["Proposer", "GreedyRolloutProposer"]


def resolve_proposer(spec: str, target) -> Proposer:
    """'rollout' -> the stand-in; 'default' -> the committed drafter; else a drafter folder."""
    if spec == "rollout":
        return GreedyRolloutProposer()
    raise ValueError(f"unknown proposer {spec!r}")
