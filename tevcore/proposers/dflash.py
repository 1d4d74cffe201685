"""A published DFlash drafter as a proposer: one block forward gives one draft row per depth.

The drafter reads the target's hidden states after a few layers over the
whole committed context, through its own KV cache. Each round the proposer
first feeds it the positions the session has committed since the last round
(the accepted path's target hidden states, taken from the session), then runs
the block [root, mask x (block_size - 1)] at the next positions and crops the
block off its cache again. Syncing inside `propose` against what the session
holds means no feedback call is needed: a new session or another context
restarts the cache. Rows are shared by every path (a DFlash block does not
condition on the draft tokens above it), which is what the best-first builder
expects.
"""

from __future__ import annotations

import threading

import torch
from torch.nn import functional as F
from transformers import DynamicCache

from tevcore.engine.draft_rows import DraftRows
from tevcore.proposers.dflash_format import FULL, DFlashSpec, load_dflash
from tevcore.target.loading import Target
from tevcore.target.session import TargetSession
from tevcore.proposers.base import HFAssistant, ProposerBase


def block_masks(spec: DFlashSpec, queries: int, keys: int, device: torch.device, dtype: torch.dtype) -> dict:
    """Additive attention masks (1, 1, queries, keys) per layer kind; None where a kind sees everything.

    The keys are the context then the block at consecutive positions (the draft
    cache holds the context from position 0 on), so the block's queries are the
    last `queries` keys. A causal kind shows a block position the context and
    the block up to itself; a windowed kind shows keys less than `window`
    positions away (the query itself counts), on both sides unless causal. This
    is the published reference's mask; transformers' SDPA mask for a
    bidirectional window also admits keys exactly `window` away, which its own
    sliding cache (window - 1 past keys) and flash path do not.
    """
    masks = {}
    for kind in set(spec.layer_types) or {FULL}:
        causal, window = spec.causal(kind), spec.window(kind)
        if not causal and (window is None or window >= keys):  # every key in reach: no mask, nothing built
            masks[kind] = None
            continue
        q = torch.arange(keys - queries, keys, device=device)[:, None]
        k = torch.arange(keys, device=device)[None]
        visible = torch.ones(queries, keys, dtype=torch.bool, device=device)
        if causal:
            visible &= k <= q
        if window is not None:
            visible &= (q - k).abs() < window
        masks[kind] = None if bool(visible.all()) else \
            torch.zeros(queries, keys, dtype=dtype, device=device).masked_fill(~visible, torch.finfo(dtype).min)[None, None]
    return masks


def block_logits(drafter, spec: DFlashSpec, target: Target, context: torch.Tensor, anchors: torch.Tensor,
                 positions: torch.Tensor, cache: DynamicCache | None = None) -> torch.Tensor:
    """Draft logits (B, block_size - 1, V) of blocks anchored at `anchors`.

    context: (B, S, k*H) the target's hidden states after the listed layers, concatenated, for the new
    context positions (all of them without a cache); anchors: (B,) the last committed token; positions:
    (B, S + block_size) absolute positions of the context then the block. The block is cut off the cache
    again before returning. Gradients flow when the caller allows them (fine-tuning).
    """
    mask = torch.full((anchors.shape[0], spec.block_size - 1), spec.mask_token_id, device=anchors.device)
    ids = torch.cat([anchors[:, None], mask], 1)
    weight = target.model.get_input_embeddings().weight
    dtype = drafter.norm.weight.dtype
    noise = F.embedding(ids, weight).to(dtype) * spec.input_embedding_scale  # raw rows: no embedding scaling
    keys = (cache.get_seq_length() if cache is not None else 0) + context.shape[1] + spec.block_size
    masks = block_masks(spec, spec.block_size, keys, anchors.device, dtype)
    out = drafter(noise_embeds=noise, context_hidden_states=context.to(dtype), position_ids=positions,
                  attention_mask=masks, cache=cache, use_cache=cache is not None)
    if cache is not None:
        cache.crop(-spec.block_size)
    head = target.model.get_output_embeddings()
    hidden = out.last_hidden_state[:, 1:]
    logits = F.linear(hidden.to(head.weight.dtype), head.weight, getattr(head, "bias", None)).float()
    logits = logits * spec.output_multiplier
    if spec.final_logit_softcapping:
        cap = spec.final_logit_softcapping
        logits = torch.tanh(logits / cap) * cap
    return logits


def features_since(session: TargetSession, spec: DFlashSpec, start: int) -> torch.Tensor:
    """(1, S - start, k*H): the session's cached hidden states of the drafter's layers from `start` on."""
    missing = [layer for layer in spec.hidden_layers if layer not in session.context_hidden]
    if missing:
        raise ValueError(f"the session does not record hidden layers {missing}; create it with "
                         f"hidden_layers={spec.hidden_layers}")
    hidden = session.context_hidden
    return torch.cat([hidden[layer][start:] for layer in spec.hidden_layers], -1)[None]


class DFlashProposer(ProposerBase):
    """A `Proposer` around a published DFlash drafter (see the module docstring)."""

    stand_in = False

    def __init__(self, drafter, spec: DFlashSpec, target: Target, name: str | None = None) -> None:
        self.drafter = drafter.eval()
        self.spec = spec
        self.target = target
        self.depth = spec.depth
        self.hidden_layers = spec.hidden_layers
        self.name = name or f"DFlash drafter ({spec.folder.name}, block {spec.block_size})"
        self._cache: DynamicCache | None = None
        self._fed: list[int] = []  # committed tokens whose positions the draft cache holds
        self._lock = threading.Lock()  # one draft cache: decodes sharing this proposer (app sessions) take turns

    @property
    def hf_assistant(self) -> HFAssistant | None:
        """The drafter as transformers' own DFlash chain decoding takes it (`bench` runs it as a peer).

        None for causal or windowed drafters: transformers' decoding builds its
        own masks (never causal), so it would run another network.
        """
        if not self.spec.plain:
            return None
        return HFAssistant(self.drafter, f"HF DFlash chain (block {self.drafter.config.block_size})",
                           {"speculation_type": "dflash"})

    @classmethod
    def load(cls, source: str, target: Target) -> DFlashProposer:
        drafter, spec = load_dflash(source, target)
        return cls(drafter, spec, target)

    def _features_to_feed(self, session: TargetSession) -> torch.Tensor:
        """Restart the draft cache unless it holds a prefix of this session's context; return the new features."""
        cached = session.cached_length
        fed = len(self._fed)
        if self._cache is None or fed > cached or session.committed[:fed] != self._fed:
            self._cache, fed = DynamicCache(), 0
        self._fed = session.committed[:cached]
        return features_since(session, self.spec, fed)

    @torch.inference_mode()
    def propose(self, session: TargetSession) -> DraftRows:
        with self._lock:
            context = self._features_to_feed(session)
            start = session.cached_length - context.shape[1]
            device = self.drafter.norm.weight.device
            positions = torch.arange(start, session.cached_length + self.spec.block_size, device=device)[None]
            anchors = torch.tensor([session.root_token], device=device)
            logits = block_logits(self.drafter, self.spec, self.target, context.to(device), anchors, positions,
                                  self._cache)
        return DraftRows(torch.log_softmax(logits[0], -1))
