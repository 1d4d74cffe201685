"""Random-weight models of the proof, built on the device from transformers' config classes: no files, no hub.

Targets go through `loading.random_target` (the tree attention and checks a
loaded target gets); the DFlash drafter is written as a published-style
config.json only, read back by the project's DFlash reader and built as the
transformers class the DFlash proposer runs, so the drafter cost measured is
the proposer's own.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from tevcore.engine.sampling import seeded_torch_rng
from tevcore.lab.gpu_proof.plans import Plan
from tevcore.proposers.dflash import DFlashProposer
from tevcore.proposers.dflash_format import (ARCHITECTURE, CONFIG_FILE, WEIGHTS_FILE, check_spec_fits_target,
                                             muse_config, read_spec)
from tevcore.target.devices import pick_dtype
from tevcore.target.loading import Target, random_target


def target_config(plan: Plan, geometry: str):
    """The transformers config of `geometry` in this plan (real or tiny)."""
    from transformers import LlamaConfig, Qwen3Config

    family, fields = plan.geometries[geometry]
    config_class = {"llama": LlamaConfig, "qwen3": Qwen3Config}[family]
    return config_class(**fields, bos_token_id=None, eos_token_id=None, pad_token_id=None)


def build_target(plan: Plan, geometry: str, device: torch.device, dtype: str | None = None) -> Target:
    """A random-weight target of `geometry`, weights made on `device` in `dtype` (default: the plan's)."""
    target = random_target(target_config(plan, geometry), f"random {geometry}" + (" (tiny)" if plan.rehearsal and
                           plan.geometries[geometry][1]["num_hidden_layers"] <= 2 else ""),
                           device=device, dtype=dtype or plan.dtype)
    target.model.generation_config.eos_token_id = None  # a random model has no end of text
    target.model.generation_config.pad_token_id = 0
    return target


def dflash_config(plan: Plan, target: Target) -> dict:
    """A published-style DFlash config.json for the plan's drafter geometry over `target`."""
    config = target.model.config
    shape = plan.dflash
    layers = shape["layers"]
    return {
        "architectures": [ARCHITECTURE], "model_type": "qwen3", "hidden_size": int(config.hidden_size),
        "intermediate_size": shape["intermediate_size"], "num_hidden_layers": layers,
        "num_attention_heads": shape["heads"], "num_key_value_heads": shape["kv_heads"], "head_dim": shape["head_dim"],
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": int(config.max_position_embeddings),
        "vocab_size": target.vocab_size, "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
        "tie_word_embeddings": False, "num_target_layers": int(config.num_hidden_layers),
        "layer_types": ["full_attention"] * layers,
        "dflash_config": {"target_layer_ids": list(shape["target_layer_ids"]), "mask_token_id": target.vocab_size - 1,
                          "block_size": shape["block_size"]},
    }


def build_dflash(plan: Plan, target: Target, seed: int = 1) -> DFlashProposer:
    """A random-weight DFlash proposer at the plan's drafter geometry, on the target's device and dtype."""
    from transformers import MuseGlimmerAssistantModel

    raw = dflash_config(plan, target)
    with tempfile.TemporaryDirectory(prefix="gpu-proof-dflash-") as folder:
        (Path(folder) / CONFIG_FILE).write_text(json.dumps(raw, indent=1))
        # the reader counts the layers the weights file names; one element per layer names them (the weights
        # themselves are made on the device below)
        save_file({f"layers.{i}.input_layernorm.weight": torch.ones(1) for i in range(raw["num_hidden_layers"])},
                  str(Path(folder) / WEIGHTS_FILE))
        spec = read_spec(Path(folder))
    check_spec_fits_target(spec, target)
    config = muse_config(spec)
    config._attn_implementation = "sdpa"
    dtype = pick_dtype(target.device, target.model.dtype)
    with seeded_torch_rng(seed, target.device), torch.device(target.device):  # the caller's random state is kept
        drafter = MuseGlimmerAssistantModel(config).to(dtype)
    drafter.requires_grad_(False)
    name = f"random DFlash drafter ({spec.raw['num_hidden_layers']} layers, hidden {spec.raw['hidden_size']}, " \
           f"block {spec.block_size})"
    return DFlashProposer(drafter, spec, target, name=name)


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
