"""The target side: loading a causal LM, and a session over it.

loading.py finds and loads the target (the embedded GGUF default, a local
Hugging Face folder or a hub id); session.py holds a prefilled context and
scores a whole draft tree in one forward with an ancestor-only mask
(tree_attention.py), then commits the accepted path by compacting the KV
cache (kv_cache.py). packed_linear.py is a CPU fast path that must give the
same logits.
"""
