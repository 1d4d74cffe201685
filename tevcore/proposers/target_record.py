"""Which target a trained drafter belongs to: a record saved in its config and a fingerprint of the weights.

Two targets of one shape (a base model and its fine-tune, two tiny random
models) would pass every shape check, so a drafter also records a hash of its
target's first embedding rows, taken in bfloat16 so that a float32 and a
bfloat16 load of the same weights agree.
"""

from __future__ import annotations

import hashlib

import torch

from tevcore.target.loading import Target

FINGERPRINT_ROWS = 256  # embedding rows hashed to tell targets of one shape apart


def target_fingerprint(target: Target) -> str:
    """A short hash of the target's first embedding rows in bfloat16: the same for a float32 or a bfloat16 load."""
    rows = target.model.get_input_embeddings().weight[:FINGERPRINT_ROWS].detach()
    data = rows.to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def target_record(target: Target, hidden_layers: tuple[int, ...]) -> dict:
    """What a drafter records about the target it was trained for."""
    config = target.model.config
    return {"name": target.name, "fingerprint": target_fingerprint(target), "hidden_size": int(config.hidden_size),
            "vocab_size": target.vocab_size, "layers": int(config.num_hidden_layers),
            "feature_layers": list(hidden_layers)}
