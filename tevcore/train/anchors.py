"""Training anchors over a distillation set: drafter inputs and per-depth teacher rows.

An anchor is a root position t of a stored sequence. Its drafter inputs are
the hidden states of positions t-C..t-1 and the root token; the teacher for
depth k is the stored target top-k at position t+k-1 (the distribution of
token t+k given the sequence so far). The sequence's own tokens t+1..t+K come
along, for training rows conditioned on a known path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tevcore.train.data import data_folders, load_shards, read_manifests, shard_files


@dataclass(frozen=True)
class AnchorBatch:
    features: torch.Tensor  # (B, C, L, H) float32
    context_mask: torch.Tensor  # (B, C) bool
    roots: torch.Tensor  # (B,) long
    teacher_ids: torch.Tensor  # (B, K, k) long, indices into the DRAFT vocabulary (0 where unused)
    teacher_probs: torch.Tensor  # (B, K, k) float32, 0 where outside the draft vocab or past the end
    anchors: torch.Tensor  # (B, 3) long: shard, sequence, position
    next_tokens: torch.Tensor  # (B, K) long: the sequence's tokens at depths 1..K (-1 past the end)


class AnchorSet:
    """All shards of a set in memory, indexed by anchor."""

    def __init__(self, folder: Path | str, context: int, depth: int, max_shards: int | None = None) -> None:
        """`folder`: one distillation set, or several joined by commas."""
        self.layers = tuple(read_manifests(folder)[0]["config"]["hidden_layers"])
        self.shards = [shard for part in data_folders(folder) for shard in load_shards(part)][:max_shards]
        self.paths = [path for part in data_folders(folder) for path in shard_files(part)][:max_shards]
        self.context, self.depth = context, depth
        rows = []
        for s, shard in enumerate(self.shards):
            offsets, starts = shard["offsets"].tolist(), shard["starts"].tolist()
            for q in range(len(starts)):
                length = offsets[q + 1] - offsets[q]
                for t in range(max(1, starts[q]), length):
                    rows.append((s, q, t))
        if not rows:
            raise ValueError(f"{folder} holds no usable anchors")
        self.index = torch.tensor(rows, dtype=torch.long)

    def __len__(self) -> int:
        return int(self.index.shape[0])

    @property
    def tokens(self) -> int:
        return sum(int(s["tokens"].numel()) for s in self.shards)

    def target_mass(self, vocab_size: int) -> torch.Tensor:
        """Summed teacher probability of each target token over every stored position."""
        mass = torch.zeros(vocab_size, dtype=torch.float64)
        for shard in self.shards:
            mass.index_add_(0, shard["top_ids"].long().flatten(), shard["top_logp"].double().exp().flatten())
        return mass

    def sequence(self, shard: int, seq: int) -> list[int]:
        """Full token ids of a stored sequence (the dropped prefix included)."""
        s = self.shards[shard]
        p0, p1 = s["prefix_offsets"][seq].item(), s["prefix_offsets"][seq + 1].item()
        o0, o1 = s["offsets"][seq].item(), s["offsets"][seq + 1].item()
        return s["prefix"][p0:p1].tolist() + s["tokens"][o0:o1].tolist()

    def full_position(self, shard: int, seq: int, t: int) -> int:
        s = self.shards[shard]
        return int(s["prefix_offsets"][seq + 1] - s["prefix_offsets"][seq]) + t

    def batch(self, rows: torch.Tensor, vocab_map: torch.Tensor) -> AnchorBatch:
        """Gather a batch; `vocab_map` maps target ids to draft ids (-1 outside the draft vocab)."""
        c, k_depth = self.context, self.depth
        anchors = self.index[rows]
        feats, masks, roots, t_ids, t_probs, nexts = [], [], [], [], [], []
        for s, q, t in anchors.tolist():
            shard = self.shards[s]
            o0, o1 = int(shard["offsets"][q]), int(shard["offsets"][q + 1])
            lo = max(0, t - c)
            hidden = shard["hidden"][o0 + lo:o0 + t]
            feat = torch.zeros(c, *hidden.shape[1:], dtype=torch.float16)
            mask = torch.zeros(c, dtype=torch.bool)
            feat[c - hidden.shape[0]:] = hidden
            mask[c - hidden.shape[0]:] = True
            ends = min(o1, o0 + t + k_depth)
            ids = torch.full((k_depth, shard["top_ids"].shape[1]), 0, dtype=torch.long)
            probs = torch.zeros(k_depth, shard["top_ids"].shape[1])
            n = ends - (o0 + t)
            ids[:n] = shard["top_ids"][o0 + t:ends].long()
            probs[:n] = shard["top_logp"][o0 + t:ends].float().exp()
            following = torch.full((k_depth,), -1, dtype=torch.long)
            after = shard["tokens"][o0 + t + 1:min(o1, o0 + t + 1 + k_depth)].long()
            following[:len(after)] = after
            feats.append(feat)
            masks.append(mask)
            roots.append(int(shard["tokens"][o0 + t]))
            t_ids.append(ids)
            t_probs.append(probs)
            nexts.append(following)
        ids = torch.stack(t_ids)
        draft = vocab_map[ids]
        probs = torch.stack(t_probs) * (draft >= 0)
        return AnchorBatch(torch.stack(feats).float(), torch.stack(masks), torch.tensor(roots),
                           draft.clamp_min(0), probs, anchors, torch.stack(nexts))
