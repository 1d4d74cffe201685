"""Tiny random-weight causal LMs of many families, saved as local Hugging Face folders.

This is how transformers tests itself: the code paths a real checkpoint of a
family takes (grouped heads, its rope, sliding-window and local/global layers,
soft-capping, fused projections) run on a model small enough for a unit test.
Every folder also gets a character-level tokenizer over the same 128-token
vocabulary, so the CLI and the app can load it like any hub model.
"""

from __future__ import annotations

from pathlib import Path

import torch

VOCAB = 128
WINDOW = 8  # sliding window of the sliding families: test contexts pass it
FAMILIES = ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "mistral", "phi3")
_COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
               bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)


def family_config(family: str, window: int = WINDOW):
    """The transformers config of a tiny `family` model; sliding families slide over `window` tokens."""
    import transformers as tf

    if family == "llama":
        return tf.LlamaConfig(**_COMMON)
    if family == "qwen2":
        return tf.Qwen2Config(**_COMMON, use_sliding_window=True, sliding_window=window, max_window_layers=1,
                              layer_types=["full_attention", "sliding_attention"])
    if family == "qwen3":
        return tf.Qwen3Config(**_COMMON, head_dim=16)
    if family == "gemma2":
        return tf.Gemma2Config(**{**_COMMON, "tie_word_embeddings": True}, head_dim=16, sliding_window=window,
                               layer_types=["sliding_attention", "full_attention"])
    if family == "gemma3":
        return tf.Gemma3TextConfig(**{**_COMMON, "tie_word_embeddings": True}, head_dim=16, sliding_window=window,
                                   layer_types=["sliding_attention", "full_attention"])
    if family == "mistral":
        return tf.MistralConfig(**_COMMON, sliding_window=window)
    if family == "phi3":
        return tf.Phi3Config(**_COMMON, sliding_window=None)
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def char_tokenizer(chat_template: bool = False):
    """A fast tokenizer with one token per ASCII character (ids 3..127) and <pad>, <s>, </s>."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    vocab.update({chr(c): c for c in range(3, VOCAB)})
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    if chat_template:
        tokenizer.chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
                                   "{% if add_generation_prompt %}<assistant>{% endif %}")
    return tokenizer


def save_tiny_model(family: str, folder: Path, seed: int = 0, window: int = WINDOW,
                    chat_template: bool = False) -> Path:
    """Build a random `family` model from `seed` and save it with its tokenizer under `folder`."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(family_config(family, window)).eval()
    folder = Path(folder)
    model.save_pretrained(folder)
    char_tokenizer(chat_template).save_pretrained(folder)
    return folder


def save_tiny_gguf(path: Path, seed: int = 0, hidden: int = 32, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                   ffn: int = 64) -> Path:
    """A tiny random Llama as a float32 GGUF file with a byte-level BPE tokenizer (printable ASCII and one merge),
    which transformers reads and de-quantises as it does a real GGUF checkpoint."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens = ["<s>", "</s>"] + [chr(c) for c in range(33, 127)] + ["ab"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3, 3] + [1] * (len(tokens) - 2))  # 3: control, 1: normal
    writer.add_token_merges(["a b"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)

    def random(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    kv = hidden // heads * kv_heads
    writer.add_tensor("token_embd.weight", random(len(tokens), hidden))
    for i in range(layers):
        for name, shape in [("attn_q", (hidden, hidden)), ("attn_k", (kv, hidden)), ("attn_v", (kv, hidden)),
                            ("attn_output", (hidden, hidden)), ("ffn_gate", (ffn, hidden)), ("ffn_up", (ffn, hidden)),
                            ("ffn_down", (hidden, ffn))]:
            writer.add_tensor(f"blk.{i}.{name}.weight", random(*shape))
        for norm in ("attn_norm", "ffn_norm"):
            writer.add_tensor(f"blk.{i}.{norm}.weight", np.ones(hidden, np.float32))
    writer.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    writer.add_tensor("output.weight", random(len(tokens), hidden))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)


def save_tiny_distillation_set(target, target_folder: Path, out: Path) -> Path:
    """A two-shard teacher-forced distillation set of four seeded random texts, features of layers 1 and 2."""
    import random

    from tevcore.train.data import DataConfig, Job, build_dataset

    rng = random.Random(0)
    text = [Job("text", tuple(rng.randrange(3, 128) for _ in range(rng.randrange(20, 30))), 2) for _ in range(4)]
    config = DataConfig(target=str(target_folder), hidden_layers=(1, 2), context=4, top_k=8, max_new_tokens=6,
                        gen_batch=2, text_batch=2)
    build_dataset(target, config, out, plan=[text[:2], text[2:]])
    return out
