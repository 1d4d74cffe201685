"""Self-generated training sequences: a left-padded batch of prompts that the one walker extends.

The batch forwards every sequence's new token in one step over a shared KV
cache and keeps, for every forwarded position, the token, the hidden states
of the feature layers and the top-k of the target's next-token log-probs.
A stop token is forwarded too (its row is a training position, as in the
teacher-forced shards); a finished sequence is fed padding that is never kept.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from tevcore.target.walker import walk_all
from tevcore.target.loading import Target


def top_k_rows(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k token ids and their log-probs (T = 1) of the target's logits."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    values, ids = logp.topk(k, dim=-1)
    return ids.int(), values.half()


def features_forward(model, layers, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The base model's last hidden state and the stacked hidden states of `layers`."""
    out = model.model(output_hidden_states=True, **kwargs)
    return out.last_hidden_state, torch.stack([out.hidden_states[layer] for layer in layers], dim=-2)


class GenerationBatch:
    """Left-padded prompts walked side by side (the walker's `Walkable`), recording features as it goes."""

    def __init__(self, target: Target, prompts: list[tuple[int, ...]], layers: tuple[int, ...], context: int,
                 top_k: int) -> None:
        self.model, self.device = target.model, target.device
        self.layers, self.context, self.top_k = layers, context, top_k
        width, n = max(len(p) for p in prompts), len(prompts)
        ids = torch.zeros(n, width, dtype=torch.long)
        mask = torch.zeros(n, width, dtype=torch.long)
        for b, prompt in enumerate(prompts):
            ids[b, width - len(prompt):] = torch.tensor(prompt)
            mask[b, width - len(prompt):] = 1
        self.cache = DynamicCache(config=self.model.config)
        self.step_ids, self.step_mask, self.step_pos = ids, mask, (mask.cumsum(-1) - 1).clamp_min(0)
        self.pending = True  # the prompts wait for their forward
        self.kept: dict[str, list[torch.Tensor]] = {"tokens": [], "hidden": [], "top_ids": [], "top_logp": []}
        self.lengths = torch.zeros(n, dtype=torch.long)  # generated tokens forwarded (and kept) per sequence

    def next_rows(self) -> torch.Tensor:
        return self._forward().cpu()  # drawn with the build's CPU generator

    def extend(self, tokens: dict[int, int], stopped: dict[int, int]) -> None:
        n = self.step_ids.shape[0]
        step = torch.zeros(n, 1, dtype=torch.long)  # padding for finished sequences
        for i, token in {**tokens, **stopped}.items():
            step[i, 0] = token
            self.lengths[i] += 1
        self.step_ids = step
        self.step_mask = torch.cat([self.step_mask, torch.ones(n, 1, dtype=torch.long)], 1)
        self.step_pos = self.step_pos[:, -1:] + 1
        self.pending = bool(tokens or stopped)

    def finish(self) -> None:
        """Forward the tokens of the walker's last step, so every drawn token has its features kept."""
        if self.pending:
            self._forward()

    def sequences(self, prompts: list[tuple[int, ...]]) -> list[dict[str, torch.Tensor]]:
        """Per prompt: its last `context` prompt tokens, the generated ones, their features, and the prefix."""
        kept = {name: torch.cat(parts, 1) for name, parts in self.kept.items()}
        out = []
        for b, prompt in enumerate(prompts):
            context = min(self.context, len(prompt) - 1)
            first = self.context - context
            end = self.context + 1 + int(self.lengths[b])
            out.append({name: kept[name][b, first:end] for name in kept} | {
                "start": torch.tensor(context),
                "prefix": torch.tensor(prompt[:len(prompt) - 1 - context], dtype=torch.long)})
        return out

    def _forward(self) -> torch.Tensor:
        """One step over the cache; keeps the forwarded positions' features; returns the newest positions'
        (n, V) logits."""
        first_step = not self.kept["tokens"]
        last, hidden = features_forward(self.model, self.layers, input_ids=self.step_ids.to(self.device),
                                        attention_mask=self.step_mask.to(self.device),
                                        position_ids=self.step_pos.to(self.device), past_key_values=self.cache,
                                        use_cache=True)
        keep = slice(-self.context - 1, None) if first_step else slice(None)
        n = self.step_ids.shape[0]
        self.kept["tokens"].append(self.step_ids[:, keep])
        self.kept["hidden"].append(hidden[:, keep].cpu().half())
        logits = self.model.lm_head(last[:, -1:]).float()  # once: the kept top-k and the walker's next rows
        top_ids, top_logp = top_k_rows(logits, self.top_k)
        pad = max(0, self.kept["hidden"][-1].shape[1] - 1)  # only the newest position has a next-token row
        self.kept["top_ids"].append(torch.cat([torch.zeros(n, pad, self.top_k, dtype=torch.int32), top_ids.cpu()], 1))
        self.kept["top_logp"].append(torch.cat([torch.zeros(n, pad, self.top_k, dtype=torch.float16),
                                                top_logp.cpu()], 1))
        self.pending = False
        return logits[:, 0]


@torch.inference_mode()
def generate_sequences(target: Target, prompts: list[tuple[int, ...]], temperatures: list[float],
                       max_new_tokens: int, layers: tuple[int, ...], context: int, top_k: int,
                       generator: torch.Generator) -> list[dict[str, torch.Tensor]]:
    """Sample a response to every prompt (each at its temperature) with the one walker; their features."""
    batch = GenerationBatch(target, prompts, layers, context, top_k)
    walk_all(batch, max_new_tokens, temperatures, generator, target.stop_token_ids())
    batch.finish()
    return batch.sequences(prompts)
