"""The app's own shaping of the studio's answers for its pages (no streamlit): replayed rounds, traces, a sampled
round's trail, result files; and, re-exported from the studio (`tevcore.studio`), the claims' wording, the workshop's
tables and the made-up example rounds that pages and tests use.

The heavy work (trace parsing, verifier draws, sampled rounds, the workshop's computations) is the studio's, where
it takes a compute-queue turn.
"""

from appdata.results import bench_rows, bench_sizes_text, read_jsonl_frame, result_file, runs_frame
from tevcore.studio.claims import TEV_EXPANDED, bound_claim, gap_claim, over_draws_note
from tevcore.studio.compact import OTHER, CompactRound, LazyTexts, approximate_round, exact_round
from tevcore.studio.coupling import COUPLING_COLUMNS, Coupling, coupling, coupling_presets
from tevcore.studio.explorer import round_context
from tevcore.studio.synthetic import synthetic_record, synthetic_records
from tevcore.studio.traces import trace_bytes, trace_settings_text
from tevcore.studio.trails import RoundTrail, round_trail, siblings_frames, trail_rule
from tevcore.studio.workshop_tables import (ROOT, WORKSHOP_COLUMNS, WorkshopTree, workshop_presets, workshop_texts,
                                            workshop_tree)

__all__ = [
    "RoundTrail", "round_trail", "siblings_frames", "trail_rule",
    "OTHER", "CompactRound", "LazyTexts", "approximate_round", "exact_round", "round_context",
    "bench_rows", "bench_sizes_text", "read_jsonl_frame", "result_file", "runs_frame",
    "synthetic_record", "synthetic_records", "trace_bytes", "trace_settings_text",
    "ROOT", "WORKSHOP_COLUMNS", "WorkshopTree", "workshop_presets", "workshop_texts", "workshop_tree",
    "COUPLING_COLUMNS", "Coupling", "coupling", "coupling_presets", "TEV_EXPANDED", "bound_claim", "gap_claim",
    "over_draws_note",
]
