"""The block drafter: one forward gives K per-depth draft distributions (DFlash-style).

Inputs are the target's own hidden states (a few layers, last C context
positions, layer-normed and projected), the frozen target embedding of the
root token and K mask slots with learned depth embeddings. A small
bidirectional encoder mixes them; each slot is read out through the frozen
target lm_head restricted to a draft vocabulary plus a trainable bias. Only
the trainable part is saved: the frozen target rows come from the target at
load, which keeps the file small and ties a drafter to its target's shape.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from tevcore.diskwrite import save_tensors, write_text_atomic
from tevcore.engine.draft_rows import BelowPath, DraftRows
from tevcore.target.loading import Target
from tevcore.target.packed_linear import PackedLinear, can_pack, check_cpu_dtype, fast_cpu_dtype, pack_linears
from tevcore.proposers.block_config import MODEL_TYPE, BlockDrafterConfig, check_draft_ids, check_config_fits_target
from tevcore.target.session import TargetSession
from tevcore.proposers.base import GreedyRolloutProposer, ProposerBase

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
DEFAULT_BRANCHES = 2  # second-pass depth-1 tokens of a drafter trained with a known slot
SURE_FIRST_LOGQ = math.log(0.9)  # above this depth-1 draft probability the second pass is skipped
class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class BlockDrafter(nn.Module):
    """Trainable block drafter; frozen target rows are non-persistent buffers set by `attach`."""

    def __init__(self, config: BlockDrafterConfig, draft_ids: torch.Tensor) -> None:
        super().__init__()
        c = config
        self.config = c
        h = c.target_hidden_size
        self.register_buffer("draft_ids", torch.as_tensor(draft_ids, dtype=torch.long).clone())
        if self.draft_ids.shape != (c.draft_vocab_size,):
            raise ValueError(f"draft_ids must have {c.draft_vocab_size} entries, got {tuple(self.draft_ids.shape)}")
        self.feature_norms = nn.ModuleList(nn.LayerNorm(h) for _ in c.hidden_layers)
        self.project = nn.Linear(h * len(c.hidden_layers), h)
        self.context_pos = nn.Parameter(torch.randn(c.context, h) * 0.02)
        self.root_pos = nn.Parameter(torch.zeros(h))
        self.slots = nn.Parameter(torch.randn(c.depth, h) * 0.02)
        layer = nn.TransformerEncoderLayer(h, c.heads, c.ffn, dropout=c.dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, c.layers, enable_nested_tensor=False)
        self.norm = RMSNorm(h)
        self.bias = nn.Parameter(torch.zeros(c.draft_vocab_size))
        if c.known_slots:
            self.known_marker = nn.Parameter(torch.zeros(h))
        self.register_buffer("embed", torch.zeros(0, h), persistent=False)
        self.register_buffer("head", torch.zeros(0, h), persistent=False)

    @property
    def depth(self) -> int:
        return self.config.depth

    def enable_known_slots(self, count: int) -> BlockDrafter:
        """Let the first `count` slots take known tokens (a fresh marker; for fine-tuning an older drafter)."""
        if count <= self.config.known_slots:
            return self
        self.config = replace(self.config, known_slots=count)
        if not hasattr(self, "known_marker"):
            self.known_marker = nn.Parameter(torch.zeros(self.config.target_hidden_size, device=self.bias.device))
        return self

    def grow_encoder(self, layers: int) -> BlockDrafter:
        """Append encoder layers that start as the identity, so a trained drafter can gain capacity.

        Each new layer copies the last one with its attention output and FFN
        output projections zeroed: both residual branches add nothing until
        training moves them, so the grown drafter drafts exactly as before.
        """
        have = self.config.layers
        check_growth(have, layers)
        for _ in range(layers - have):
            layer = copy.deepcopy(self.encoder.layers[-1])
            for linear in (layer.self_attn.out_proj, layer.linear2):
                nn.init.zeros_(linear.weight)
                nn.init.zeros_(linear.bias)
            self.encoder.layers.append(layer)
        self.encoder.num_layers = layers
        self.config = replace(self.config, layers=layers)
        return self

    def attach(self, target: Target) -> BlockDrafter:
        """Take the frozen embedding and lm_head rows from `target` (checks its shape)."""
        check_config_fits_target(self.config, target)
        embed = target.model.get_input_embeddings().weight.detach().float()
        head = target.model.get_output_embeddings().weight.detach().float()
        self.embed = embed.to(self.bias.device)
        self.head = head.index_select(0, self.draft_ids.to(head.device)).to(self.bias.device)
        return self

    def forward(self, features: torch.Tensor, context_mask: torch.Tensor, roots: torch.Tensor,
                head: Callable[[torch.Tensor], torch.Tensor] | None = None,
                known: torch.Tensor | None = None) -> torch.Tensor:
        """Draft log-probs over the draft vocabulary, (B, K, Vd).

        features: (B, C, layers, H) target hidden states, oldest first;
        context_mask: (B, C) True where a position exists (left padding is False);
        roots: (B,) root token ids; head: the product with the attached rows plus
        the bias, if given in a faster form (see `BlockProposer`); known: (B, P)
        target token ids already fixed at depths 1..P (-1 where not), P <= known_slots,
        so the deeper rows are conditioned on that path. The encoder runs in its
        weights' dtype, the head and the log-softmax in float32.
        """
        if self.head.numel() == 0:
            raise RuntimeError("attach(target) before running the drafter")
        c = self.config
        dtype = self.project.weight.dtype  # the encoder's (see `cast_encoder`)
        normed = torch.cat([norm(features[:, :, i].to(dtype)) for i, norm in enumerate(self.feature_norms)], -1)
        ctx = self.project(normed) + self.context_pos
        root = (self.embed[roots] + self.root_pos)[:, None]
        slots = self.slots.expand(features.shape[0], -1, -1)
        if known is not None:
            slots = self._fill_known(slots, known)
        x = torch.cat([ctx, root, slots], 1).to(dtype)
        keep = torch.cat([context_mask, torch.ones(x.shape[0], 1 + c.depth, dtype=torch.bool, device=x.device)], 1)
        x = self.encoder(x, src_key_padding_mask=~keep)
        out = self.norm(x[:, -c.depth:]).float()
        logits = head(out) if head is not None else out @ self.head.T + self.bias
        return torch.log_softmax(logits, dim=-1)

    def cast_encoder(self, dtype: torch.dtype) -> BlockDrafter:
        """Cast the feature norms, projection and encoder (the bulk of the weights) to `dtype`, for inference.

        The head rows, bias and embeddings stay float32: bfloat16 logits, rounded
        to 1/8 near 20, cost 1-4% of E, while the encoder's activations do not.
        """
        for part in (self.feature_norms, self.project, self.encoder):
            part.to(dtype)
        return self

    def _fill_known(self, slots: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
        count = known.shape[1]
        if count > self.config.known_slots:
            raise ValueError(f"{count} known tokens, but this drafter was trained with {self.config.known_slots}")
        given = (known >= 0)[..., None]
        tokens = self.embed[known.clamp_min(0)] + self.known_marker
        return torch.cat([slots[:, :count] + tokens * given, slots[:, count:]], 1)

    def full_vocab(self, draft_logq: torch.Tensor) -> torch.Tensor:
        """Scatter draft-vocabulary log-probs into the target vocabulary; other rows get -inf."""
        out = draft_logq.new_full((*draft_logq.shape[:-1], self.config.target_vocab_size), -math.inf)
        return out.index_copy_(-1, self.draft_ids.to(out.device), draft_logq)


def check_growth(have: int, layers: int) -> None:
    """Encoder layers can be added to a drafter, never taken away."""
    if layers < have:
        raise ValueError(f"cannot shrink a drafter of {have} encoder layers to {layers}")


def context_window(session: TargetSession, config: BlockDrafterConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The last C cached positions of the drafter's layers, left-padded: (1, C, L, H) and (1, C)."""
    missing = [layer for layer in config.hidden_layers if layer not in session.context_hidden]
    if missing:
        raise ValueError(f"the session does not record hidden layers {missing}; create it with "
                         f"hidden_layers={config.hidden_layers}")
    states = torch.stack([session.context_hidden[layer][-config.context:] for layer in config.hidden_layers], 1)
    have = states.shape[0]
    features = states.new_zeros(config.context, len(config.hidden_layers), config.target_hidden_size)
    mask = torch.zeros(config.context, dtype=torch.bool, device=states.device)
    if have:
        features[-have:] = states
        mask[-have:] = True
    return features[None], mask[None]


class BlockProposer(ProposerBase):
    """A `Proposer` around a trained block drafter.

    On a CPU its linears and its draft-vocabulary head are packed for oneDNN
    (see `packed_linear`): that cut its time per round by a third. Where the
    CPU runs bfloat16 natively the proposer also casts its drafter's encoder
    to bfloat16 (`dtype`, default `fast_cpu_dtype`; see `cast_encoder`),
    which halves the bytes a forward reads. Drafts only choose the tree, so
    the verifiers stay exact whatever the dtype. A
    drafter trained with a known depth-1 slot also runs a second pass for its
    `branches` likeliest depth-1 tokens (all of them in one batch), whose
    deeper rows then know the token above them. It skips that pass when its top
    depth-1 token is near-certain: the shared rows then already follow it.
    Its rows also draft below any path a drawn tree reaches, when a builder
    asks (`@sib1`): one more batched pass per depth with such paths.
    """

    stand_in = False

    def __init__(self, drafter: BlockDrafter, name: str = "block drafter", branches: int | None = None,
                 dtype: torch.dtype | None = None) -> None:
        on_cpu = drafter.bias.device.type == "cpu"
        if dtype is not None and on_cpu:
            check_cpu_dtype(dtype, "block drafter")  # an explicit choice is refused, never silently changed
        dtype = dtype if dtype is not None else (fast_cpu_dtype() if on_cpu else drafter.project.weight.dtype)
        self.drafter = drafter.cast_encoder(dtype).eval()
        self._head = None
        if can_pack(self.drafter):
            pack_linears(self.drafter)
            self._head = PackedLinear(self.drafter.head, self.drafter.bias)
        self.depth = drafter.config.depth
        self.hidden_layers = drafter.config.hidden_layers
        if branches is None:
            branches = DEFAULT_BRANCHES if drafter.config.known_slots else 0
        if branches < 0 or (branches and not drafter.config.known_slots):
            raise ValueError(f"branches must be >= 0, and > 0 needs a drafter trained with a known slot; "
                             f"got {branches} for known_slots={drafter.config.known_slots}")
        self.branches = int(branches)
        self.name = (name + (f", {self.branches} conditioned branches" if self.branches else "")
                     + (f", {str(dtype).removeprefix('torch.')}" if dtype != torch.float32 else ""))

    @torch.inference_mode()
    def propose(self, session: TargetSession) -> DraftRows:
        device = self.drafter.bias.device
        features, mask = context_window(session, self.drafter.config)
        features, mask = features.to(device), mask.to(device)
        roots = torch.tensor([session.root_token], device=device)
        logq = self.drafter(features, mask, roots, head=self._head)[0]
        shared = self.drafter.full_vocab(logq)
        below_path, known_depth = self._below_path(features, mask, roots), self.drafter.config.known_slots
        if not self.branches or self.depth < 2 or float(logq[0].max()) >= SURE_FIRST_LOGQ:
            # a near-certain depth-1 token: the shared rows already follow it
            return DraftRows(shared, below_path=below_path, known_depth=known_depth)
        firsts = self.drafter.draft_ids[logq[0].topk(self.branches).indices]
        count = len(firsts)
        below = self.drafter(features.expand(count, -1, -1, -1), mask.expand(count, -1), roots.expand(count),
                             head=self._head, known=firsts[:, None])[:, 1:]
        below = self.drafter.full_vocab(below)
        return DraftRows(shared, dict(zip(firsts.tolist(), below.unbind(0))), below_path, known_depth)

    def _below_path(self, features: torch.Tensor, mask: torch.Tensor, roots: torch.Tensor) -> BelowPath | None:
        """For a drafter trained with known slots: the rows below given paths of this context, one batched pass
        for the paths asked together (each path once per context: a tree's later depths and other trees of the
        round reuse it)."""
        if not self.drafter.config.known_slots:
            return None
        made: dict[tuple[int, ...], torch.Tensor] = {}

        @torch.inference_mode()
        def below_path(paths: list[tuple[int, ...]]) -> list[torch.Tensor]:
            new = [path for path in dict.fromkeys(paths) if path not in made]
            if new:
                count, longest = len(new), max(len(path) for path in new)
                known = torch.full((count, longest), -1, dtype=torch.long, device=features.device)
                for i, path in enumerate(new):
                    known[i, :len(path)] = torch.tensor(path, dtype=torch.long)
                out = self.drafter(features.expand(count, -1, -1, -1), mask.expand(count, -1),
                                   roots.expand(count), head=self._head, known=known)
                out = self.drafter.full_vocab(out)
                made.update((path, out[i, len(path):]) for i, path in enumerate(new))
            return [made[path] for path in paths]

        return below_path


def save_drafter(drafter: BlockDrafter, folder: Path, dtype: torch.dtype = torch.float32) -> None:
    """config.json + model.safetensors (trainable weights and draft ids; no frozen target rows)."""
    folder = Path(folder)
    made = not folder.exists()
    state = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous().cpu()
             for k, v in drafter.state_dict().items()}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        save_tensors(folder / WEIGHTS_FILE, state, metadata={"format": "pt", "model_type": MODEL_TYPE})
        write_text_atomic(folder / CONFIG_FILE, json.dumps(drafter.config.to_dict(), indent=2))
    except BaseException:
        if made:  # a failed write (a full disk) leaves no empty or partial drafter folder behind
            shutil.rmtree(folder, ignore_errors=True)
        raise


def read_config(folder: Path) -> BlockDrafterConfig:
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: not a block drafter folder")
    try:
        return BlockDrafterConfig.from_dict(json.loads(path.read_text()))
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError, RecursionError) as err:
        raise ValueError(f"{path} is not a valid block drafter config: {err}") from None


def load_drafter(folder: Path, target: Target) -> BlockDrafter:
    """Load a drafter folder against `target` (fp32, on the target's device)."""
    folder = Path(folder)
    config = read_config(folder)
    check_config_fits_target(config, target)
    path = folder / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{path} is not a readable safetensors file (damaged or truncated?): {err}") from None
    if "draft_ids" not in state:
        raise ValueError(f"{path} holds no draft_ids: not a block drafter's weights")
    check_draft_ids(config, state["draft_ids"], path)
    _check_weights_fit(config, state, folder)
    drafter = BlockDrafter(config, state["draft_ids"])
    try:
        drafter.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
    except RuntimeError as err:
        raise ValueError(f"{path} does not match {folder / CONFIG_FILE}: {err}") from None
    return drafter.to(target.device).attach(target).eval()


def _check_weights_fit(config: BlockDrafterConfig, state: dict[str, torch.Tensor], folder: Path) -> None:
    """The weights file holds the tensors config.json describes, in their shapes, as floats: checked on a
    skeleton that allocates nothing, so an absurd size (an FFN or a depth of 10^9) is refused, never allocated."""
    path, where = folder / WEIGHTS_FILE, folder / CONFIG_FILE
    layers = {name.split(".")[2] for name in state if name.startswith("encoder.layers.")}
    if len(layers) != config.layers:
        raise ValueError(f"{where} says layers={config.layers}, but {path} holds {len(layers)} encoder layers")
    norms = {name.split(".")[1] for name in state if name.startswith("feature_norms.")}
    if len(norms) != len(config.hidden_layers):
        raise ValueError(f"{where} names {len(config.hidden_layers)} hidden_layers, but {path} holds feature norms "
                         f"for {len(norms)}")
    with torch.device("meta"):
        skeleton = BlockDrafter(config, torch.zeros(config.draft_vocab_size, dtype=torch.long))
    for name, expected in skeleton.state_dict().items():
        found = state.get(name)
        if found is None:
            continue  # a missing tensor is named by load_state_dict
        if expected.is_floating_point() and not found.is_floating_point():
            raise ValueError(f"{path}: {name} holds {str(found.dtype).removeprefix('torch.')} values, "
                             "not floating-point weights")
        if found.shape != expected.shape:
            raise ValueError(f"{path}: {name} has shape {list(found.shape)}, but {where} implies "
                             f"{list(expected.shape)}")


def default_drafter_path() -> Path:
    """The committed default drafter: assets/drafter at the repository root."""
    return Path(__file__).resolve().parents[2] / "assets" / "drafter"


def load_default_proposer(target: Target, dtype: torch.dtype | None = None, branches: int | None = None):
    """The committed default drafter when present and built for this target's shape, else the stand-in.

    A damaged committed drafter raises (it must be fixed, not silently replaced).
    """
    path = default_drafter_path()
    if not (path / CONFIG_FILE).is_file():
        return GreedyRolloutProposer()
    try:
        check_config_fits_target(read_config(path), target)
    except ValueError:
        return GreedyRolloutProposer()  # the default drafter belongs to the default target only
    drafter = load_drafter(path, target)
    return BlockProposer(drafter, name=f"block drafter (assets/drafter, K={drafter.depth})", branches=branches,
                         dtype=dtype)
