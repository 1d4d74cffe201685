"""The block drafter kind: its spec ('drafter' or a drafter folder) and how the training loop trains it.

A block drafter is the one kind a run can make from nothing: its draft
vocabulary is the tokens with the most teacher mass in the distillation set
and its initial weights come from the seed alone. It reads the set's stored
hidden states (the last C positions before each anchor), so one forward
gives a whole batch's rows. A drafter trained with known slots is given
the sequence's first L tokens (L from 1 to `known_depth`) on a share of
the anchors, and the teacher rows of those depths are dropped there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tevcore.engine.sampling import seeded_torch_rng
from tevcore.proposers.block import (BlockDrafter, BlockProposer, check_growth, default_drafter_path,
                                     load_default_proposer, load_drafter, read_config, save_drafter)
from tevcore.proposers.block_config import DEFAULT_LAYERS, BlockDrafterConfig, layer_shape_of
from tevcore.proposers.kind import DrafterKind, LoadOptions
from tevcore.proposers.target_record import target_record
from tevcore.target.loading import Target

COMMITTED = "drafter"  # the spec of the committed drafter (assets/drafter)


def _claims(spec: str) -> str | None:
    """'drafter', or anything that reads as a path (a missing folder is then refused by name, not as unknown).

    A spec that starts like 'name:' belongs to a prefixed kind, registered or not, never to this one.
    """
    if spec == COMMITTED or Path(spec).expanduser().exists():
        return spec
    if re.match(r"[A-Za-z][\w-]*:", spec):
        return None
    return spec if any(mark in spec for mark in ("/", "\\", "~")) or spec.startswith(".") else None


def drafter_folder(source: str) -> Path:
    folder = default_drafter_path() if source == COMMITTED else Path(source).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"drafter folder not found: {folder}" + (" (it is a file)" if folder.exists() else ""))
    return folder


def _load(source: str, target: Target, options: LoadOptions) -> BlockProposer:
    if source == COMMITTED:  # the stand-in where the committed drafter does not fit the target
        return load_default_proposer(target, dtype=options.drafter_dtype, branches=options.branches)
    folder = drafter_folder(source)
    return BlockProposer(load_drafter(folder, target), name=options.name or f"block drafter ({folder})",
                         branches=options.branches, dtype=options.drafter_dtype)


def new_drafter(config: Any, anchors: Any, target: Target) -> BlockDrafter:
    """A fresh drafter whose draft vocabulary is the tokens with the most teacher mass in the data."""
    vocab = min(config.draft_vocab, target.vocab_size)
    draft_ids = anchors.target_mass(target.vocab_size).topk(vocab).indices.sort().values
    heads, ffn = layer_shape_of(target)
    shape = BlockDrafterConfig(
        target_vocab_size=target.vocab_size, target_hidden_size=int(target.model.config.hidden_size),
        draft_vocab_size=vocab, hidden_layers=tuple(anchors.layers), context=config.context, depth=config.depth,
        layers=config.layers or DEFAULT_LAYERS, heads=config.heads or heads, ffn=config.ffn or ffn,
        dropout=config.dropout,
        target=target_record(target, tuple(anchors.layers)))
    with seeded_torch_rng(config.seed):  # the initial weights, from the seed alone
        drafter = BlockDrafter(shape, draft_ids)
    return drafter.to(target.device).attach(target)


def vocab_map(drafter: BlockDrafter) -> torch.Tensor:
    """Target id -> draft-vocabulary column (-1 outside it)."""
    index = torch.full((drafter.config.target_vocab_size,), -1, dtype=torch.long)
    index[drafter.draft_ids.cpu()] = torch.arange(drafter.config.draft_vocab_size)
    return index


def known_inputs(batch: Any, known: torch.Tensor, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, slots) leading path tokens given to the drafter (-1 = not given), and teacher probs without the given
    depths. `known` (B,) is how many tokens each row is given.

    Rows near the end of their sequence have fewer tokens to give: a depth past the end stays unconditioned.
    """
    tokens = batch.next_tokens[:, :slots]
    wanted = torch.arange(tokens.shape[1])[None, :] < known[:, None]
    given = tokens.where(wanted, torch.full_like(tokens, -1))
    probs = batch.teacher_probs.clone()
    probs[:, :tokens.shape[1]] *= (given < 0).float()[..., None]
    return given, probs


def _hold_key_biases(drafter: BlockDrafter) -> None:
    """Keep the key part of every attention's input bias where it is.

    A bias added to every key shifts all of one query's scores by the same
    amount, which the softmax ignores: that part's true gradient is zero, and
    what reaches it is rounding noise that Adam scales up to full-size steps.
    Zeroing it changes no output and makes the weights independent of how a
    batch was summed (one process or several ranks).
    """
    size = drafter.config.target_hidden_size
    for layer in drafter.encoder.layers:
        bias = layer.self_attn.in_proj_bias
        keep = torch.ones_like(bias)
        keep[size:2 * size] = 0
        bias.register_hook(lambda grad, keep=keep: grad * keep)


class BlockTraining:
    """A block drafter under training (see `kind.TrainingAdapter`)."""

    def __init__(self, drafter: BlockDrafter) -> None:
        self.drafter = drafter
        self.network: nn.Module = drafter
        self.vocab_map = vocab_map(drafter)
        _hold_key_biases(drafter)

    def _device(self) -> torch.device:
        return self.drafter.bias.device

    def rows(self, model: nn.Module, batch: Any, anchors: Any, known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        device = self._device()
        teacher_probs, given = batch.teacher_probs, None
        if self.drafter.config.known_slots:  # always given (maybe all -1): DDP expects every parameter to take part
            given, teacher_probs = known_inputs(batch, known, self.drafter.config.known_slots)
            given = given.to(device)
        logq = model(batch.features.to(device), batch.context_mask.to(device), batch.roots.to(device), known=given)
        return logq, teacher_probs

    def tree_rows(self, batch: Any, anchors: Any, logq: torch.Tensor) -> torch.Tensor:
        """From an eval-mode forward (no dropout): the trees the drafter really builds."""
        device = self._device()
        self.drafter.eval()
        with torch.no_grad():
            built = self.drafter(batch.features.to(device), batch.context_mask.to(device), batch.roots.to(device))
        self.drafter.train()
        return self.drafter.full_vocab(built.float().cpu())

    def save(self, folder: Path, dtype: torch.dtype | None = None) -> Path:
        save_drafter(self.drafter, folder, dtype or torch.float32)
        return Path(folder)


class BlockTrainer:
    """Starts a block drafter run: fresh (no source), or from a drafter folder, grown to `config.layers`."""

    shape_fields = ("depth", "context", "layers", "heads", "ffn", "dropout", "draft_vocab")

    def check(self, source: str | None, config: Any, target: Target) -> str | None:
        if source is not None and config.layers is not None:
            check_growth(read_config(drafter_folder(source)).layers, config.layers)
        return source

    def start(self, source: str | None, config: Any, anchors: Any, target: Target) -> BlockTraining:
        if source is None:
            drafter = new_drafter(config, anchors, target)
        else:
            drafter = load_drafter(drafter_folder(source), target)
            if config.layers is not None:
                drafter.grow_encoder(config.layers)
        if (drafter.config.depth, drafter.config.context, drafter.config.hidden_layers) != (
                config.depth, config.context, tuple(anchors.layers)):
            raise ValueError("the starting drafter's depth, context or hidden layers differ from the config and data")
        return self._ready(drafter, config)

    def load(self, folder: Path, config: Any, target: Target) -> BlockTraining:
        return self._ready(load_drafter(folder, target), config)

    def shape(self, source: str) -> dict:
        saved = read_config(drafter_folder(source))
        return {"depth": saved.depth, "context": saved.context, "layers": saved.layers, "heads": saved.heads,
                "ffn": saved.ffn, "dropout": saved.dropout, "draft_vocab": saved.draft_vocab_size}


    @staticmethod
    def _ready(drafter: BlockDrafter, config: Any) -> BlockTraining:
        if config.known_prob:
            drafter.enable_known_slots(config.known_depth)
        return BlockTraining(drafter.train())


KIND = DrafterKind("block-drafter", "drafter | <block drafter folder>",
                   "the committed block drafter, or one `train` made", _claims, _load, BlockTrainer(), ready=(COMMITTED,))
