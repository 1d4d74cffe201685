"""A block drafter's config: what it holds, what it was trained for, and the checks a loaded one must pass.

Kept apart from the model so that a folder's config is validated (and refused
with a message that names the problem) before any weights are read.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import torch

from tevcore.proposers.target_record import target_fingerprint
from tevcore.target.loading import Target

MODEL_TYPE = "tevcore-block-drafter"
DEFAULT_LAYERS = 2  # encoder layers of a new drafter
LEGACY_TARGET = "the default SmolLM2-135M-Instruct"  # what a drafter saved without a target record was trained for


def feature_layers_for(target: Target, count: int = 4) -> tuple[int, ...]:
    """The target layers whose hidden states a new drafter reads: `count` spread evenly up to the last.

    Hidden-state index i is the output of layer i (0: the embeddings), so the
    last layer is always read; SmolLM2-135M's 30 layers give 8, 16, 24, 30.
    """
    depth = int(target.model.config.get_text_config(decoder=True).num_hidden_layers)
    step = math.ceil(depth / count)
    return tuple(range(step, depth, step)) + (depth,)


def layer_shape_of(target: Target) -> tuple[int, int]:
    """A new drafter's attention heads and MLP width: the target's own, since a drafter layer works on the
    target's hidden size (SmolLM2-135M: 9 heads, 1536)."""
    config = target.model.config.get_text_config(decoder=True)
    return int(config.num_attention_heads), int(getattr(config, "intermediate_size", 4 * config.hidden_size))


@dataclass(frozen=True)
class BlockDrafterConfig:
    """Shape of a block drafter and the target shape it was trained against.

    The fields that depend on the target (feature layers, heads, MLP width)
    have no default: a stored config names them, and a new drafter takes
    them from its target (`feature_layers_for`, `layer_shape_of`).
    """

    target_vocab_size: int
    target_hidden_size: int
    draft_vocab_size: int
    hidden_layers: tuple[int, ...] = field(kw_only=True)
    heads: int = field(kw_only=True)
    ffn: int = field(kw_only=True)
    context: int = 8
    depth: int = 6
    layers: int = DEFAULT_LAYERS
    dropout: float = 0.0  # training only; eval mode turns it off
    known_slots: int = 0  # leading slots trained to take a known token (path-conditioned rows)
    target: dict | None = None  # the target it was trained for (`target_record`); None: saved before records

    def __post_init__(self) -> None:
        layers = self.hidden_layers
        if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__") or not all(_is_int(x) for x in layers):
            raise ValueError(f"hidden_layers must be a list of target layer indices, got {layers!r}")
        object.__setattr__(self, "hidden_layers", tuple(int(x) for x in layers))
        for name in ("target_vocab_size", "target_hidden_size", "draft_vocab_size", "context", "depth", "layers",
                     "heads", "ffn", "known_slots"):
            value, low = getattr(self, name), 0 if name == "known_slots" else 1
            if not _is_int(value) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not self.hidden_layers:
            raise ValueError("hidden_layers must name at least one target layer")
        if min(self.hidden_layers) < 0:
            raise ValueError(f"hidden_layers must be target layer indices >= 0, got {list(self.hidden_layers)}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise ValueError(f"dropout must be a number, got {self.dropout!r}")
        if self.target_hidden_size % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide the hidden size {self.target_hidden_size}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if not 0 <= self.known_slots < self.depth:
            raise ValueError(f"known_slots must lie in [0, depth), got {self.known_slots}")
        if self.draft_vocab_size > self.target_vocab_size:
            raise ValueError("the draft vocabulary cannot exceed the target vocabulary")

    @classmethod
    def from_dict(cls, data: dict) -> BlockDrafterConfig:
        if not isinstance(data, dict):
            raise ValueError(f"a block drafter config is a JSON object, got a {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known - {"model_type"}
        if unknown:
            raise ValueError(f"unknown block drafter config keys: {sorted(unknown)}")
        if data.get("model_type", MODEL_TYPE) != MODEL_TYPE:
            raise ValueError(f"model_type {data.get('model_type')!r} is not {MODEL_TYPE!r}")
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in data]
        if missing:
            raise ValueError(f"the block drafter config lacks {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict:
        return {"model_type": MODEL_TYPE, **asdict(self), "hidden_layers": list(self.hidden_layers)}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_draft_ids(config: BlockDrafterConfig, ids: torch.Tensor, where: Path) -> None:
    """Draft ids are distinct integer ids inside the vocabulary the drafter was trained for."""
    if ids.is_floating_point() or ids.dim() != 1:
        raise ValueError(f"{where}: draft_ids must be a 1-D integer tensor, got {ids.dtype} of shape {tuple(ids.shape)}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= config.target_vocab_size):
        raise ValueError(f"{where}: draft_ids run from {int(ids.min())} to {int(ids.max())}, outside the target "
                         f"vocabulary of {config.target_vocab_size} tokens")
    values, counts = torch.unique(ids, return_counts=True)
    if (counts > 1).any():
        repeated = values[counts > 1]
        raise ValueError(f"{where}: draft_ids repeats token {int(repeated[0])} ({len(repeated)} ids appear more "
                         f"than once); each draft row must be a distinct target token")


def check_config_fits_target(config: BlockDrafterConfig, target: Target) -> None:
    """A drafter only fits the target it was trained for (its record), or at least that target's shape."""
    hidden = int(target.model.config.hidden_size)
    layers = int(target.model.config.num_hidden_layers)
    record = config.target or {}
    trained = f"target {record['name']}" if "name" in record else LEGACY_TARGET
    if target.vocab_size != config.target_vocab_size:
        raise ValueError(f"the drafter was trained for {trained} with a vocabulary of {config.target_vocab_size} "
                         f"tokens, but the target {target.name} has {target.vocab_size}")
    if hidden != config.target_hidden_size:
        raise ValueError(f"the drafter was trained for {trained} with hidden size {config.target_hidden_size}, "
                         f"but the target {target.name} has {hidden}")
    if max(config.hidden_layers) > layers:
        raise ValueError(f"the drafter (trained for {trained}) reads layer {max(config.hidden_layers)}, "
                         f"but the target {target.name} has {layers} layers")
    if "fingerprint" in record and record["fingerprint"] != target_fingerprint(target):
        raise ValueError(f"the drafter was trained for target {record['name']}, not for {target.name} "
                         f"(same shape, other weights)")
