"""Drafters: given the committed context, propose K per-depth draft distributions."""

from .base import Proposer, GreedyRolloutProposer

__all__ = ["Proposer", "GreedyRolloutProposer"]
