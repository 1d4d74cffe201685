"""The training config: a frozen, validated dataclass; unknown keys are rejected."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tevcore.engine.sampling import MAX_SEED
from tevcore.train.losses import ANCHOR_LOSSES, TREE_NORMS, TREE_WEIGHTS


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on; stored as config.json in the run folder."""

    data: str  # distillation set folder (build-data), or several joined by commas
    target: str = "default"
    init: str | None = None  # drafter folder to start from (fine-tuning, ExitTrain comparisons)
    depth: int = 6
    context: int = 8
    layers: int | None = None  # encoder layers: 2 for a new drafter; with init, grow the drafter to this many
    heads: int | None = None  # attention heads of a new drafter; None: the target's
    ffn: int | None = None  # MLP width of a new drafter; None: the target's
    dropout: float = 0.0
    draft_vocab: int = 8192
    steps: int = 1000
    batch_size: int = 64  # global: split across DDP ranks
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    known_prob: float = 0.0  # share of anchors trained with a known path given (path-conditioned rows)
    known_depth: int = 1  # such an anchor is given its first L tokens, L drawn uniformly from 1..known_depth
    anchor_loss: str = "soft"  # "soft": CE to the target's top-k rows; "hard": one-hot CE on its greedy token
    tree_lambda: float = 0.0  # 0 = plain distillation; ExitTrain default is 0.1
    tree_weight: str = "path"  # "path": floored P(v); "exit": X(v) * depth(v); "flow": P(v) * target row at v
    tree_alpha: float = 1e-4
    tree_budget: int = 8
    tree_temperature: float = 1.0
    tree_norm: str = "anchor"  # "anchor": each anchor's tree term sums over its nodes; "node": divided by its nodes
    tree_anchors: int = 0  # extra anchors per step (global) from the pool that get the tree loss (ExitTrain: e.g. 8)
    tree_share: float = 0.0  # instead: this share of each batch's anchors (drawn from the pool) also gets a tree
    tree_pool: int = 32  # sequences whose target KV cache is kept for tree scoring
    max_shards: int | None = None
    checkpoint_every: int = 100
    probe_every: int = 0  # every this many steps: cosine of the tree and anchor terms' gradients (metrics.jsonl)
    keep_checkpoints: bool = False  # keep every checkpoint folder (to evaluate the run at several points), not only the newest
    threads: int = 1

    def __post_init__(self) -> None:
        positive = ("depth", "context", "draft_vocab", "steps", "batch_size", "known_depth",
                    "tree_budget", "checkpoint_every", "threads", "tree_pool")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("layers", "heads", "ffn"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("warmup", "tree_anchors", "probe_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {getattr(self, name)!r}")
        for name in ("lr", "tree_alpha"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("weight_decay", "grad_clip", "tree_lambda", "tree_temperature"):
            if float(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if not 0 <= self.known_prob <= 1:
            raise ValueError(f"known_prob must lie in [0, 1], got {self.known_prob}")
        if self.known_depth >= self.depth:
            raise ValueError(f"known_depth must be below the drafter's depth {self.depth} (a known path leaves a "
                             f"depth to draft), got {self.known_depth}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}")
        if self.tree_weight not in TREE_WEIGHTS:
            raise ValueError(f"tree_weight must be one of {TREE_WEIGHTS}, got {self.tree_weight!r}")
        if not self.tree_alpha < 1:
            raise ValueError(f"tree_alpha must be < 1, got {self.tree_alpha}")
        if self.anchor_loss not in ANCHOR_LOSSES:
            raise ValueError(f"anchor_loss must be one of {ANCHOR_LOSSES}, got {self.anchor_loss!r}")
        if self.tree_norm not in TREE_NORMS:
            raise ValueError(f"tree_norm must be one of {TREE_NORMS}, got {self.tree_norm!r}")
        if not 0 <= self.tree_share <= 1:
            raise ValueError(f"tree_share must lie in [0, 1], got {self.tree_share}")
        if self.tree_share and self.tree_anchors:
            raise ValueError("give tree_anchors (extra anchors) or tree_share (a share of the batch), not both")
        if self.tree_share and self.tree_anchor_count == 0:
            raise ValueError(f"tree_share {self.tree_share} of batch_size {self.batch_size} gives no tree anchor")
        if self.probe_every and self.tree_anchor_count == 0:
            raise ValueError("probe_every needs trees to probe: tree_anchors >= 1 or tree_share > 0")
        if self.tree_lambda > 0 and self.tree_anchor_count == 0:
            raise ValueError("tree_lambda > 0 needs tree_anchors >= 1 or tree_share > 0")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be an integer in [0, {MAX_SEED}], got {self.seed!r}")
        if not isinstance(self.keep_checkpoints, bool):
            raise ValueError(f"keep_checkpoints must be true or false, got {self.keep_checkpoints!r}")
        if self.max_shards is not None and self.max_shards < 1:
            raise ValueError(f"max_shards must be >= 1 or None, got {self.max_shards}")

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown training config keys: {unknown}")
        if "data" not in data:
            raise ValueError("the training config needs 'data' (a distillation set folder)")
        return cls(**data)

    @classmethod
    def from_file(cls, path: Path) -> TrainConfig:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def tree_anchor_count(self) -> int:
        """Anchors per step (global) that get a tree: the extra ones, or the batch's share."""
        return self.tree_anchors or round(self.tree_share * self.batch_size)

    @property
    def exit_train(self) -> bool:
        return self.tree_lambda > 0

    def warnings(self) -> list[str]:
        """Settings that are valid but probably not what the user meant (printed by the plan, shown by the app)."""
        found = []
        if self.warmup >= self.steps:
            found.append(f"warmup ({self.warmup}) >= steps ({self.steps}): the learning rate rises for the whole run "
                         "and never reaches its cosine decay; lower --warmup")
        return found
