"""What the GPU proof measures, per mode: the geometries, tree sizes, contexts and repeats.

The GPU run uses the real geometries (every layer, the family's vocabulary);
the rehearsal uses the same families at tiny geometry, except SmolLM2, which
is small enough to run at its real geometry on a CPU, so the rehearsal's
prediction step drafts with the committed drafter (it fits only that shape).
The sizes and repeats are chosen so the GPU call fits one device run (each
step's time limit is in `cli.STEP_LIMITS`) and the rehearsal fits a test of
the slow lane on a small shared CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

SMOLLM2, QWEN3_8B, LLAMA31_8B = "smollm2-135m", "qwen3-8b", "llama-3.1-8b"
GEOMETRIES = (SMOLLM2, QWEN3_8B, LLAMA31_8B)
SMOLLM2_VOCAB = 49152  # the embedded SmolLM2 tokenizer's size

# Published configs' fields (config.json of each model; Llama 3.1's rope scaling included).
REAL = {
    SMOLLM2: ("llama", dict(vocab_size=SMOLLM2_VOCAB, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                            num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                            rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True)),
    QWEN3_8B: ("qwen3", dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                             num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                             rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False)),
    LLAMA31_8B: ("llama", dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                               num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                               rms_norm_eps=1e-5, tie_word_embeddings=False,
                               rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                                                    low_freq_factor=1.0, high_freq_factor=4.0,
                                                    original_max_position_embeddings=8192))),
}
_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=4096)
TINY = {
    SMOLLM2: REAL[SMOLLM2],
    QWEN3_8B: ("qwen3", dict(_TINY, vocab_size=4096, head_dim=16, tie_word_embeddings=False)),
    LLAMA31_8B: ("llama", dict(_TINY, vocab_size=4096, tie_word_embeddings=False)),
}
# The published Qwen3-8B DFlash drafter: 5 Qwen3 layers at the target's width, block 16, reading 5 target layers.
DFLASH_REAL = dict(layers=5, block_size=16, target_layer_ids=(1, 9, 17, 25, 33), intermediate_size=12288,
                   heads=32, kv_heads=8, head_dim=128)
DFLASH_TINY = dict(layers=2, block_size=8, target_layer_ids=(0, 1), intermediate_size=128, heads=4, kv_heads=2,
                   head_dim=16)


@dataclass(frozen=True)
class Plan:
    """The sizes of one run of the proof."""

    rehearsal: bool
    geometries: dict  # name -> (family, config fields)
    dflash: dict
    curve_nodes: tuple[int, ...]  # drafted nodes of a tree forward (0 = the one-token forward)
    curve_contexts: tuple[int, ...]
    curve_repeats: int
    verifier_budgets: tuple[int, ...]
    verifier_trees: int
    verifier_rounds: int
    round_budgets: tuple[int, ...]
    round_context: int
    rounds_per_budget: int
    identity_tokens: int
    identity_context: int
    prediction_context: int  # one of curve_contexts
    draft_repeats: int

    @property
    def dtype(self) -> str:
        """bfloat16 on the GPU; float32 in the rehearsal (every CPU runs it)."""
        return "float32" if self.rehearsal else "bfloat16"


GPU = Plan(rehearsal=False, geometries=REAL, dflash=DFLASH_REAL, curve_nodes=(0, 1, 8, 16, 32, 64, 128, 256),
           curve_contexts=(512, 2048), curve_repeats=10, verifier_budgets=(32, 64, 128, 256), verifier_trees=4,
           verifier_rounds=40, round_budgets=(16, 64, 128), round_context=512, rounds_per_budget=12,
           identity_tokens=32, identity_context=64, prediction_context=512, draft_repeats=20)
REHEARSAL = Plan(rehearsal=True, geometries=TINY, dflash=DFLASH_TINY, curve_nodes=(0, 1, 8, 32),
                 curve_contexts=(64, 128), curve_repeats=3, verifier_budgets=(8, 32), verifier_trees=2,
                 verifier_rounds=6, round_budgets=(8, 16), round_context=32, rounds_per_budget=4, identity_tokens=12,
                 identity_context=16, prediction_context=64, draft_repeats=3)


def plan_for(rehearsal: bool) -> Plan:
    return REHEARSAL if rehearsal else GPU
