"""The app's services (no streamlit): example records, traces, replay rows, workshop trees, results, sampled rounds
on a toy target and the workshop's coupling preset.

Pages call these and never build target sessions or laws themselves.
`sampled` gives a sampled round's rrs or block trail and a run's sibling diagnostics; `sampled_rounds` draws many
sampled trees at one toy context for the verifier comparison (`tevcore.lab.context_rounds` draws them at a real
context); `coupling` is the workshop's coupling preset.

Every flow quantity is computed by `tevcore.engine.flow.target_flow`; these
modules only shape inputs for it (trees, node logits) and read its outputs.
"""

from appdata.claims import TEV_EXPANDED, bound_claim, gap_claim, over_draws_note
from appdata.coupling import COUPLING_COLUMNS, Coupling, coupling, coupling_presets, coupling_rates
from appdata.replay import (OTHER, CompactRound, LazyTexts, approximate_round, exact_round, rescored_logits,
                            round_context)
from appdata.sampled import RoundTrail, round_trail, siblings_frames, trail_rule
from appdata.results import bench_rows, bench_sizes_text, read_jsonl_frame, result_file, runs_frame
from appdata.sampled_rounds import SampledRounds, rules_for, rules_over_rounds, sampled_rounds, toy_texts
from appdata.synthetic import synthetic_record, synthetic_records
from appdata.traces import load_trace, trace_bytes, trace_from_bytes, trace_settings_text
from appdata.workshop import ROOT, WORKSHOP_COLUMNS, WorkshopTree, workshop_presets, workshop_texts, workshop_tree

__all__ = [
    "RoundTrail", "round_trail", "siblings_frames", "trail_rule",
    "OTHER", "CompactRound", "LazyTexts", "approximate_round", "exact_round", "rescored_logits", "round_context",
    "bench_rows", "bench_sizes_text", "read_jsonl_frame", "result_file", "runs_frame",
    "synthetic_record", "synthetic_records", "load_trace", "trace_bytes", "trace_from_bytes", "trace_settings_text",
    "ROOT",
    "WORKSHOP_COLUMNS", "WorkshopTree", "workshop_presets", "workshop_texts", "workshop_tree", "SampledRounds",
    "rules_for", "rules_over_rounds", "sampled_rounds", "toy_texts", "COUPLING_COLUMNS", "Coupling", "coupling",
    "coupling_presets", "coupling_rates", "TEV_EXPANDED", "bound_claim", "gap_claim", "over_draws_note",
]
