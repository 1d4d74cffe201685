"""The app's services (no streamlit): example records, traces, replay rows, workshop trees, results, sampled rounds
on a toy target and the workshop's coupling preset.

Pages call these and never build target sessions or laws themselves.
The rounds, traces and trails of the explorer and the comparison are the studio's now (`tevcore.studio.compact`,
`traces`, `trails`, `explorer`), named here too; `coupling` is the workshop's
coupling preset. The heavy work (trace parsing, verifier draws, sampled rounds, the coupling's rounds) is the
studio's (`tevcore.studio`), where it takes a compute-queue turn.

Every flow quantity is computed by `tevcore.engine.flow.target_flow`; these
modules only shape inputs for it (trees, node logits) and read its outputs.
"""

from appdata.claims import TEV_EXPANDED, bound_claim, gap_claim, over_draws_note
from appdata.coupling import COUPLING_COLUMNS, Coupling, coupling, coupling_presets
from appdata.results import bench_rows, bench_sizes_text, read_jsonl_frame, result_file, runs_frame
from tevcore.lab.context_rounds import SampledRounds
from tevcore.studio.toy_rounds import toy_texts
from tevcore.verify.registry import rules_for
from appdata.synthetic import synthetic_record, synthetic_records
from appdata.workshop import ROOT, WORKSHOP_COLUMNS, WorkshopTree, workshop_presets, workshop_texts, workshop_tree
# moved to the studio (the explorer's and the comparison's rounds, traces, trails); named here for the pages
from tevcore.studio.compact import OTHER, CompactRound, LazyTexts, approximate_round, exact_round
from tevcore.studio.explorer import round_context
from tevcore.studio.traces import trace_bytes, trace_settings_text
from tevcore.studio.trails import RoundTrail, round_trail, siblings_frames, trail_rule

__all__ = [
    "RoundTrail", "round_trail", "siblings_frames", "trail_rule",
    "OTHER", "CompactRound", "LazyTexts", "approximate_round", "exact_round", "round_context",
    "bench_rows", "bench_sizes_text", "read_jsonl_frame", "result_file", "runs_frame",
    "synthetic_record", "synthetic_records", "trace_bytes", "trace_settings_text",
    "ROOT",
    "WORKSHOP_COLUMNS", "WorkshopTree", "workshop_presets", "workshop_texts", "workshop_tree", "SampledRounds",
    "rules_for", "toy_texts", "COUPLING_COLUMNS", "Coupling", "coupling",
    "coupling_presets", "TEV_EXPANDED", "bound_claim", "gap_claim", "over_draws_note",
]
