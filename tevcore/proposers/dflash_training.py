"""The DFlash kind: its spec ('dflash:<folder or hub id>', or a folder whose config names DFlash) and fine-tuning.

A DFlash block attends to the target's hidden states over the WHOLE context
at its own layers, not to a distillation set's last C stored positions, so
each sequence's features are recomputed once by the frozen target and kept;
each anchor's block is one forward over that context. Its rows cover the
full target vocabulary (no draft vocabulary). A run saves the drafter in the
published layout, so the DFlash proposer (and any other DFlash runtime)
loads its checkpoints and its result. There is no fresh start: a run
fine-tunes a published (or previously fine-tuned) drafter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from tevcore.proposers.dflash import DFlashProposer, block_logits
from tevcore.proposers.dflash_format import PREFIX, DFlashSpec, is_dflash_folder, load_dflash, locate, read_spec, save_dflash
from tevcore.proposers.kind import DrafterKind, LoadOptions
from tevcore.target.loading import Target


def _claims(spec: str) -> str | None:
    if spec.startswith(PREFIX):
        return spec[len(PREFIX):]
    return spec if is_dflash_folder(Path(spec).expanduser()) else None


def _load(source: str, target: Target, options: LoadOptions) -> DFlashProposer:
    proposer = DFlashProposer.load(source, target)
    proposer.name = options.name or proposer.name
    return proposer


class SequenceFeatures:
    """The target's concatenated hidden states at the drafter's layers over each stored sequence, computed once."""

    def __init__(self, target: Target, layer_indices: tuple[int, ...], anchors: Any) -> None:
        self.target, self.layers, self.anchors = target, layer_indices, anchors
        self._kept: dict[tuple[int, int], torch.Tensor] = {}

    def __call__(self, shard: int, seq: int) -> torch.Tensor:
        key = (shard, seq)
        if key not in self._kept:
            ids = torch.tensor([self.anchors.sequence(shard, seq)], device=self.target.device)
            with torch.no_grad():  # not inference_mode: these tensors enter the drafter's autograd graph
                states = self.target.model(input_ids=ids, output_hidden_states=True).hidden_states
            self._kept[key] = torch.cat([states[i][0] for i in self.layers], -1).float()
        return self._kept[key]


class BlockRows(nn.Module):
    """The drafter's (B, depth, V) log-probs at a batch of anchors: one module, so DDP wraps one forward per step."""

    def __init__(self, drafter: nn.Module, spec: DFlashSpec, target: Target, depth: int) -> None:
        super().__init__()
        self.drafter, self.spec, self.target, self.depth = drafter, spec, target, depth
        self._features: SequenceFeatures | None = None

    def forward(self, rows: torch.Tensor, anchors: Any) -> torch.Tensor:
        if self._features is None or self._features.anchors is not anchors:
            self._features = SequenceFeatures(self.target, self.spec.hidden_layers, anchors)
        device = self.target.device
        out = []
        for s, q, t in rows.tolist():
            position = anchors.full_position(s, q, t)
            context = self._features(s, q)[:position][None]
            root = torch.tensor([anchors.sequence(s, q)[position]], device=device)
            positions = torch.arange(position + self.spec.block_size, device=device)[None]
            logits = block_logits(self.drafter, self.spec, self.target, context, root, positions)[0, :self.depth]
            out.append(torch.log_softmax(logits, -1))
        return torch.stack(out)


class DFlashTraining:
    """A DFlash drafter under training (see `kind.TrainingAdapter`)."""

    def __init__(self, drafter: nn.Module, spec: DFlashSpec, target: Target, depth: int) -> None:
        self.drafter, self.spec = drafter.train(), spec
        self.network = BlockRows(self.drafter, spec, target, depth)
        self.vocab_map = torch.arange(target.vocab_size)  # rows span the whole target vocabulary

    def rows(self, model: nn.Module, batch: Any, anchors: Any, known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return model(batch.anchors, anchors), batch.teacher_probs

    def tree_rows(self, batch: Any, anchors: Any, logq: torch.Tensor) -> torch.Tensor:
        return logq.detach().float().cpu()  # no dropout: the training rows are the rows it builds from

    def save(self, folder: Path, dtype: torch.dtype | None = None) -> Path:
        return save_dflash(self.drafter, self.spec, folder, dtype)


class DFlashTrainer:
    """Starts a DFlash fine-tune from the checked source (loaded once, before the run folder is made)."""

    shape_fields = ("depth",)

    def check(self, source: str | None, config: Any, target: Target) -> tuple:
        initial = load_dflash(source, target)
        depth = initial[1].depth
        if config.depth > depth:
            raise ValueError(f"--depth {config.depth} exceeds the DFlash drafter's {depth} draft positions per "
                             f"block: pass --depth {depth} (or less)")
        if config.layers is not None or config.known_prob:
            raise ValueError("--layers and --known-prob apply to block drafters, not to a DFlash drafter")
        return initial

    def start(self, initial: tuple, config: Any, anchors: Any, target: Target) -> DFlashTraining:
        return DFlashTraining(*initial, target, config.depth)

    def load(self, folder: Path, config: Any, target: Target) -> DFlashTraining:
        return DFlashTraining(*load_dflash(folder, target), target, config.depth)

    def shape(self, source: str) -> dict:
        """Its depth is the block's; it has no encoder shape or dropout to set, and reads the data's context."""
        return {"depth": read_spec(locate(source)).depth}


KIND = DrafterKind("dflash", PREFIX + "<folder or hub id>",
                   "a published DFlash drafter; a DFlash folder is also recognised by its config", _claims, _load,
                   DFlashTrainer())
