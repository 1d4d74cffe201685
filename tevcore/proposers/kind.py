"""What a drafter kind registers: how its spec is recognised and loaded, and, if trainable, how it trains.

A kind is one module that defines a `DrafterKind`; the registry
(`registry.py`) lists it once, and from then on every command that takes a
proposer or a starting drafter (round, generate, bench, eval-drafter,
compare, train, the app) understands its spec. The training side is two
small objects the one training loop (`tevcore.train.loop`) drives: a
`Trainer` that checks and starts a run of this kind, and the
`TrainingAdapter` it returns, which gives the draft rows of a batch of
anchors and saves the drafter in its own layout. Both only read the
training config and the anchor batches through their attributes, so this
layer imports nothing from `tevcore.train`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from tevcore.proposer_protocol import Proposer
from tevcore.target.loading import Target


@dataclass(frozen=True)
class LoadOptions:
    """Settings a command may pass to whichever kind its spec names; a kind ignores those it has no use for."""

    drafter_dtype: torch.dtype | None = None  # a block drafter's compute dtype (None: its own choice)
    branches: int | None = None  # a block drafter's conditioned second-pass branches (None: its default)
    name: str | None = None  # the proposer's display name (None: the kind's own)


class TrainingAdapter(Protocol):
    """A drafter being trained, as the training loop sees it.

    `network` is what the optimizer steps and DDP wraps; `rows` calls it (or
    its DDP wrapper, passed as `model`) on a batch and returns the (B, K, R)
    draft log-probs over the drafter's own R row columns, with the teacher
    probabilities those rows are fitted to; `vocab_map` maps a target id to its
    row column (-1 outside). `tree_rows` gives (B, K, V) log-probs over the
    whole target vocabulary without gradient: the rows the drafter would
    really build its trees from.
    """

    network: nn.Module
    vocab_map: torch.Tensor

    def rows(self, model: nn.Module, batch: Any, anchors: Any, known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ...

    def tree_rows(self, batch: Any, anchors: Any, logq: torch.Tensor) -> torch.Tensor:
        ...

    def save(self, folder: Path, dtype: torch.dtype | None = None) -> Path:
        ...


class Trainer(Protocol):
    """How a run of one kind starts: checked before the run folder exists, then started or reloaded."""

    shape_fields: tuple[str, ...]  # the training-config fields `shape` fixes

    def check(self, source: str | None, config: Any, target: Target) -> Any:
        """Refuse a bad start with a one-line ValueError; return what `start` reuses (e.g. a loaded drafter)."""
        ...

    def start(self, checked: Any, config: Any, anchors: Any, target: Target) -> TrainingAdapter:
        """The drafter the run starts from: the checked source, or a fresh one where the kind can make one."""
        ...

    def load(self, folder: Path, config: Any, target: Target) -> TrainingAdapter:
        """A drafter this kind saved (a checkpoint, the final folder) ready to train on."""
        ...

    def shape(self, source: str) -> dict:
        """The training-config fields a run starting from `source` must take (its depth, its width...)."""
        ...


@dataclass(frozen=True)
class DrafterKind:
    """One kind of proposer and everything the commands need to know about it.

    `claims(spec)` returns the source the kind loads from (the spec without
    its prefix, a folder) or None when the spec is not this kind's; kinds are
    asked in registration order, so a prefix kind is asked before a kind that
    takes any folder. `load` builds the proposer. `spec` and `help` make the
    help texts and `ready` the choice lists. `trainer` is None for a kind
    that cannot be trained.
    """

    name: str
    spec: str  # how its spec reads, e.g. "dflash:<DFlash folder or hub id>"
    help: str  # what it gives, one phrase
    claims: Callable[[str], str | None]
    load: Callable[[str, Target, LoadOptions], "Proposer"]
    trainer: Trainer | None = None
    ready: tuple[str, ...] = ()  # specs of this kind that name no folder (offered as choices in the app)


def prefixed(prefix: str) -> Callable[[str], str | None]:
    """`claims` for a kind whose specs start with `prefix`: the rest of the spec."""
    return lambda spec: spec[len(prefix):] if spec.startswith(prefix) else None


def keyword(word: str) -> Callable[[str], str | None]:
    """`claims` for a kind named by one word."""
    return lambda spec: spec if spec == word else None
