"""The target side: loading a causal LM, and a session over it.

devices.py picks and checks `--device` / `--dtype`; loading.py finds and
loads the target (the embedded GGUF default, a local Hugging Face folder, a
GGUF file or a hub id) with one-line errors for what cannot work;
caller_model.py takes a model the caller already loaded, as it is; session.py
holds a prefilled context and scores a whole draft tree in one forward with
an ancestor-only mask cut to each layer's window (tree_masks.py,
tree_attention.py), then commits the accepted path by compacting a KV cache
that keeps every key in every layer (kv_cache.py). walker.py is the one
autoregressive walk over sessions (the AR baseline, evaluation, the rollout
stand-in, training data). packed_linear.py is a CPU fast path that must give
the same logits.
"""
