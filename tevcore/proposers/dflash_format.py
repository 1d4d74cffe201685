"""The published DFlash checkpoint format: read, check against a target, load into transformers' class, save.

A published DFlash drafter is a folder (or hub repo) with `config.json`
(architecture `DFlashDraftModel`, Qwen3 layer fields, a `dflash_config` with
`target_layer_ids` and `mask_token_id`, `block_size` there or at the top
level) and `model.safetensors` (`fc`, `hidden_norm`, Qwen3 layers, `norm`; no
embedding, no head: the target's are used). transformers ships the same
network as `MuseGlimmerAssistantModel`; the weights fit it once `fc.` is
renamed `encoder.fc.` and `hidden_norm.` `encoder.output_norm_enc.`, so we
load into that class rather than keep a second implementation of the forward.

Layer kinds follow the published reference reader (the checkpoint's own
`DFlashDraftModel`, which reads the config as a Qwen3Config): a layer is
`full_attention` or `sliding_attention` (`layer_types`, or Qwen3's
`use_sliding_window` / `max_window_layers` rule); `is_causal`, when given,
makes every layer causal or not, and otherwise sliding layers are causal and
full ones are not; a sliding layer's window is Qwen3Config's `sliding_window`
(none unless `use_sliding_window`). transformers' class has no causal block,
so the masks are built by the proposer (`dflash.block_masks`) and passed in.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from tevcore.diskwrite import save_tensors, temporary_folder, write_text_atomic
from tevcore.target.loading import Target

ARCHITECTURE = "DFlashDraftModel"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
PREFIX = "dflash:"
# published name -> transformers' name (MuseGlimmerAssistantModel)
RENAMES = (("fc.", "encoder.fc."), ("hidden_norm.", "encoder.output_norm_enc."))
FULL, SLIDING = "full_attention", "sliding_attention"


@dataclass(frozen=True)
class DFlashSpec:
    """What a DFlash config says about the drafter and the target it reads."""

    folder: Path
    raw: dict  # the config.json as read (written back unchanged when saving)
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    block_size: int
    input_embedding_scale: float
    output_multiplier: float
    final_logit_softcapping: float | None
    layer_types: tuple[str, ...] = ()  # FULL or SLIDING per drafter layer
    is_causal: bool | None = None  # the config's explicit setting; None: sliding layers causal, full ones not
    sliding_window: int | None = None  # keys a sliding layer's query reaches, itself included; None: no limit

    def causal(self, layer_type: str) -> bool:
        """Whether a layer of this kind lets a block position see only earlier ones (and the context)."""
        return self.is_causal if self.is_causal is not None else layer_type == SLIDING

    def window(self, layer_type: str) -> int | None:
        """The sliding window of a layer of this kind (None: the whole context and block)."""
        return self.sliding_window if layer_type == SLIDING else None

    @property
    def plain(self) -> bool:
        """Every layer non-causal and unwindowed: the network transformers' own DFlash decoding runs."""
        return all(not self.causal(t) and self.window(t) is None for t in self.layer_types)

    @property
    def depth(self) -> int:
        """Draft depths per block: every block position after the anchor."""
        return self.block_size - 1

    @property
    def hidden_layers(self) -> tuple[int, ...]:
        """Session hidden-state indices (0 is the embedding output, so layer i is entry i + 1)."""
        return tuple(i + 1 for i in self.target_layer_ids)


def is_dflash_folder(path: str | Path) -> bool:
    """Whether `path` is a folder whose config.json names the DFlash architecture."""
    config = Path(path) / CONFIG_FILE
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text()).get("architectures") == [ARCHITECTURE]
    except (ValueError, AttributeError, OSError, RecursionError):  # not DFlash; its own reader names the problem
        return False


def locate(source: str) -> Path:
    """A local folder for a DFlash source: the folder itself, or a hub id fetched into the HF cache."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        return folder
    if folder.exists() or source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise ValueError(f"DFlash drafter {source!r}: no such folder (and not a hub id 'owner/name')")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source, allow_patterns=[CONFIG_FILE, "*.safetensors"]))
    except Exception as err:  # offline, unknown repo, no access: all end the same way for the user
        raise ValueError(f"DFlash drafter {source!r}: cannot fetch it from the hub ({type(err).__name__}); "
                         f"a local folder works offline") from None


def _value(raw: dict, name: str, default=None):
    """A DFlash setting: `dflash_config` first (newer checkpoints), then the top level (older ones)."""
    nested = raw.get("dflash_config") or {}
    return nested.get(name, raw.get(name, default))


def read_spec(folder: Path) -> DFlashSpec:
    """Read and check a DFlash config.json; each problem is one clear ValueError."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise ValueError(f"{path} is missing: not a DFlash drafter folder")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
    except RecursionError:
        raise ValueError(f"{path} nests too deeply to be a DFlash config") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a DFlash config is a JSON object, got a {type(raw).__name__}")
    arch = raw.get("architectures")
    if arch != [ARCHITECTURE]:
        raise ValueError(f"{path}: architecture {arch} is not [{ARCHITECTURE!r}] (DFlash2 and other drafters "
                         f"are different networks)")
    for name in ("target_layer_ids", "mask_token_id"):
        if _value(raw, name) is None:
            raise ValueError(f"{path}: the DFlash config has no {name} (in dflash_config or at the top level)")
    if _value(raw, "block_size") is None:
        raise ValueError(f"{path}: the DFlash config has no block_size")
    _check_layer_count(raw, Path(folder), path)
    qwen = _qwen_config(raw, path)
    layer_types = tuple(qwen.layer_types)
    unknown = sorted(set(layer_types) - {FULL, SLIDING})
    if unknown:
        raise ValueError(f"{path}: layer type {unknown[0]!r} is not supported (only {FULL!r} and {SLIDING!r})")
    window = qwen.sliding_window if SLIDING in layer_types else None
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise ValueError(f"{path}: sliding_window {window!r} must be a positive integer")
    causal = _value(raw, "is_causal")
    if causal is not None and not isinstance(causal, bool):
        raise ValueError(f"{path}: is_causal {causal!r} must be true, false or absent")
    if raw.get("attention_bias"):
        raise ValueError(f"{path}: attention biases (attention_bias) are not supported")
    ids = tuple(int(i) for i in _value(raw, "target_layer_ids"))
    block = int(_value(raw, "block_size"))
    if not ids or min(ids) < 0:
        raise ValueError(f"{path}: target_layer_ids {list(ids)} must be a non-empty list of layer indices >= 0")
    if block < 2:
        raise ValueError(f"{path}: block_size {block} must be >= 2 (an anchor and at least one draft)")
    softcap = _value(raw, "final_logit_softcapping")
    return DFlashSpec(folder=Path(folder), raw=raw, target_layer_ids=ids, mask_token_id=int(_value(raw, "mask_token_id")),
                      block_size=block, input_embedding_scale=float(_value(raw, "input_embedding_scale", 1.0)),
                      output_multiplier=float(_value(raw, "output_multiplier", 1.0)),
                      final_logit_softcapping=float(softcap) if softcap else None, layer_types=layer_types,
                      is_causal=causal, sliding_window=window)


def _check_layer_count(raw: dict, folder: Path, path: Path) -> None:
    """num_hidden_layers is the number of layers the weights hold (read from their headers only): checked before
    anything is sized by it, so an absurd depth is refused instead of building 10^9 layers."""
    declared = raw.get("num_hidden_layers")
    if not isinstance(declared, int) or isinstance(declared, bool) or declared < 1:
        raise ValueError(f"{path}: num_hidden_layers {declared!r} must be a positive integer")
    files, held = sorted(folder.glob("*.safetensors")), set()
    if not files:
        raise ValueError(f"{folder} has no {WEIGHTS_FILE}")
    for file in files:
        try:
            with safe_open(str(file), "pt") as weights:
                held |= {name.split(".")[1] for name in weights.keys() if name.startswith("layers.")}
        except (SafetensorError, OSError) as err:
            raise ValueError(f"{file} is not a readable safetensors file (damaged or truncated?): {err}") from None
    if len(held) != declared:
        raise ValueError(f"{path} says num_hidden_layers={declared}, but the weights hold {len(held)} layers")


def _qwen_config(raw: dict, path: Path | None = None):
    """The config as the reference reader sees it: Qwen3Config's fields, normalised (rope, layer kinds)."""
    from transformers import Qwen3Config

    fields = {k: v for k, v in raw.items() if k not in ("model_type", "architectures", "auto_map")}
    try:
        return Qwen3Config(**fields)
    except Exception as err:  # transformers' strict configs raise their own validation error types
        where = f"{path}: " if path is not None else ""
        reason = str(err.__cause__ or err).strip().splitlines()[0]
        raise ValueError(f"{where}the Qwen3 layer fields are not valid: {reason}") from None


def check_spec_fits_target(spec: DFlashSpec, target: Target) -> None:
    """A DFlash drafter fits only a target with its hidden size, vocabulary and at least its layers."""
    config = target.model.config
    hidden, depth = int(config.hidden_size), int(config.num_hidden_layers)
    name = spec.folder.name
    if int(spec.raw.get("hidden_size", -1)) != hidden:
        raise ValueError(f"DFlash drafter {name} has hidden size {spec.raw.get('hidden_size')}, "
                         f"but the target {target.name} has {hidden}")
    vocab = spec.raw.get("vocab_size")
    if vocab is not None and int(vocab) != target.vocab_size:
        raise ValueError(f"DFlash drafter {name} was made for a vocabulary of {vocab} tokens, "
                         f"but the target {target.name} has {target.vocab_size}")
    if max(spec.target_layer_ids) >= depth:
        raise ValueError(f"DFlash drafter {name} reads target layer {max(spec.target_layer_ids)}, "
                         f"but the target {target.name} has {depth} layers (0..{depth - 1})")
    expected = spec.raw.get("num_target_layers")
    if expected is not None and int(expected) != depth:
        raise ValueError(f"DFlash drafter {name} was made for a target of {expected} layers, "
                         f"but the target {target.name} has {depth}")
    if not 0 <= spec.mask_token_id < target.vocab_size:
        raise ValueError(f"DFlash drafter {name}: mask_token_id {spec.mask_token_id} is outside the target's "
                         f"vocabulary of {target.vocab_size}")
    if spec.block_size > target.max_context:
        raise ValueError(f"DFlash drafter {name}: block_size {spec.block_size} exceeds the target {target.name}'s "
                         f"context of {target.max_context} positions")


def muse_config(spec: DFlashSpec):
    """transformers' config for the same network (Qwen3 fields normalised by Qwen3Config, e.g. rope)."""
    from transformers import MuseGlimmerAssistantConfig

    qwen = _qwen_config(spec.raw, spec.folder)
    layers = int(qwen.num_hidden_layers)
    return MuseGlimmerAssistantConfig(
        hidden_size=qwen.hidden_size, intermediate_size=qwen.intermediate_size, num_hidden_layers=layers,
        num_attention_heads=qwen.num_attention_heads, num_key_value_heads=qwen.num_key_value_heads,
        head_dim=qwen.head_dim, rms_norm_eps=qwen.rms_norm_eps, rope_parameters=dict(qwen.rope_parameters),
        max_position_embeddings=qwen.max_position_embeddings, hidden_act=qwen.hidden_act,
        layer_types=list(spec.layer_types), sliding_window=spec.sliding_window or qwen.max_position_embeddings,
        attention_dropout=0, bos_token_id=None, eos_token_id=None,
        pad_token_id=None, block_size=spec.block_size, mask_token_id=spec.mask_token_id,
        target_layer_ids=list(spec.target_layer_ids))


def _published_to_muse(name: str) -> str:
    for old, new in RENAMES:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _muse_to_published(name: str) -> str:
    for old, new in RENAMES:
        if name.startswith(new):
            return old + name[len(new):]
    return name


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files (one file or shards)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise ValueError(f"{folder} has no {WEIGHTS_FILE}")
    state = {}
    for file in files:
        try:
            state.update(load_file(str(file)))
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(f"{file} is not a readable safetensors file (damaged or truncated?): {err}") from None
    return state


def load_dflash(source: str | Path, target: Target):
    """(transformers' drafter holding the weights, its spec), checked against `target`, on its device and dtype."""
    from transformers import MuseGlimmerAssistantModel

    folder = locate(str(source))
    spec = read_spec(folder)
    check_spec_fits_target(spec, target)
    state = {_published_to_muse(k): v for k, v in read_weights(folder).items()}
    _check_weights(spec, state, folder)
    config = muse_config(spec)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        drafter = MuseGlimmerAssistantModel(config)
    expected = set(drafter.state_dict())
    missing, unknown = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unknown:
        shown = [_muse_to_published(k) for k in missing[:3]], [_muse_to_published(k) for k in unknown[:3]]
        raise ValueError(f"{folder} does not hold a DFlash drafter of its config: missing {shown[0]}, "
                         f"unexpected {shown[1]}")
    try:
        drafter.load_state_dict(state, assign=True, strict=True)
    except RuntimeError as err:
        raise ValueError(f"{folder}: weight shapes do not match its config.json: {str(err).splitlines()[1:2]}") from None
    drafter.rotary_emb = type(drafter.rotary_emb)(config)  # its buffers were made on the meta device
    drafter.to(device=target.device, dtype=target.model.dtype)
    return drafter.eval(), spec


def _check_weights(spec: DFlashSpec, state: dict[str, torch.Tensor], folder: Path) -> None:
    """Floating-point weights only (an absurd width is refused by the shapes, on a network that allocates nothing)."""
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            raise ValueError(f"{folder}: {_muse_to_published(name)} holds {str(tensor.dtype).removeprefix('torch.')} "
                             "values, not floating-point weights")


def save_dflash(drafter, spec: DFlashSpec, folder: Path, dtype: torch.dtype | None = None) -> Path:
    """Write `drafter` back in the published layout (its config.json as read), atomically."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    state = {_muse_to_published(k): (v.to(dtype) if dtype is not None else v).detach().contiguous().cpu()
             for k, v in drafter.state_dict().items()}
    if any(not math.isfinite(float(v.float().abs().max())) for v in state.values() if v.numel()):
        raise ValueError("the DFlash drafter has non-finite weights; not saved")
    tmp = temporary_folder(folder)
    try:
        save_tensors(tmp / WEIGHTS_FILE, state, metadata={"format": "pt"})
        write_text_atomic(tmp / CONFIG_FILE, json.dumps(spec.raw, indent=2))
    except BaseException:  # a failed write (a full disk) leaves no partial folder behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if folder.exists():
        for file in (WEIGHTS_FILE, CONFIG_FILE):
            (tmp / file).replace(folder / file)
        tmp.rmdir()
    else:
        tmp.rename(folder)
    return folder
