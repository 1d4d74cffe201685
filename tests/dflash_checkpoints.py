"""Tiny random DFlash drafters written in the published layout (config.json + model.safetensors).

Written independently of tevcore's loader, from the format as published:
Qwen3 layer fields, `dflash_config` with `target_layer_ids` and
`mask_token_id`, `block_size` nested (newer) or top level (older); weights
`fc`, `hidden_norm`, per-layer Qwen3 attention with q/k norms and MLP, `norm`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

HEADS, KV_HEADS, HEAD_DIM, FFN = 4, 2, 16, 96


def dflash_config(hidden: int, vocab: int, target_layers: int, layer_ids=(0, 1), block_size: int = 4,
                  mask_token_id: int = 3, nested_block: bool = True, layers: int = 2, **extra) -> dict:
    """A published-style config.json dict; `extra` adds or overrides top-level keys."""
    nested = {"target_layer_ids": list(layer_ids), "mask_token_id": mask_token_id}
    config = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": hidden,
        "intermediate_size": FFN, "num_hidden_layers": layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": None, "max_position_embeddings": 512, "vocab_size": vocab, "hidden_act": "silu",
        "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": False,
        "num_target_layers": target_layers, "layer_types": ["full_attention"] * layers, "dtype": "float32",
        "dflash_config": nested,
    }
    if nested_block:
        nested["block_size"] = block_size
    else:
        config["block_size"] = block_size
    config.update(extra)
    return config


def dflash_weights(config: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights of the published names and shapes (norms near 1, projections small)."""
    g = torch.Generator().manual_seed(seed)
    h, k = config["hidden_size"], len(config["dflash_config"]["target_layer_ids"])

    def matrix(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=g) * (1.0 / cols ** 0.5)

    def norm(size: int) -> torch.Tensor:
        return 1.0 + 0.1 * torch.randn(size, generator=g)

    state = {"fc.weight": matrix(h, k * h), "hidden_norm.weight": norm(h), "norm.weight": norm(h)}
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        state.update({
            p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.q_proj.weight": matrix(HEADS * HEAD_DIM, h),
            p + "self_attn.k_proj.weight": matrix(KV_HEADS * HEAD_DIM, h),
            p + "self_attn.v_proj.weight": matrix(KV_HEADS * HEAD_DIM, h),
            p + "self_attn.o_proj.weight": matrix(h, HEADS * HEAD_DIM),
            p + "self_attn.q_norm.weight": norm(HEAD_DIM), p + "self_attn.k_norm.weight": norm(HEAD_DIM),
            p + "mlp.gate_proj.weight": matrix(FFN, h), p + "mlp.up_proj.weight": matrix(FFN, h),
            p + "mlp.down_proj.weight": matrix(h, FFN),
        })
    return state


def write_dflash(folder: Path, config: dict, seed: int = 0, weights: dict | None = None) -> Path:
    """Write config.json and model.safetensors into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file(weights if weights is not None else dflash_weights(config, seed), str(folder / "model.safetensors"))
    return folder
