"""Pure figure builders for the app: records and plain data in, plotly figures out.

No streamlit here, so every figure can be unit-tested on records. Nothing in
this package computes target flow: a, P, m and X are read from the
`TargetFlow` objects the engine produced. One module per concern; the names
are re-exported here so a page writes `figures.tree_figure(...)`.
"""

from figures.ablation import ablation_figure, arm_colour
from figures.common import (EXIT_COLOUR, NAIVE_NAME, PATH_COLOUR, node_name, number_text, p_value_text, plural,
                            short)
from figures.draws import draws_table, node_draws_text, trail_table
from figures.icicle import icicle_figure, icicle_rows, record_icicle_figure
from figures.lessons import lesson_bars_figure, predictions_figure
from figures.node import next_token_figure, node_distribution, timings_figure
from figures.rounds import (emitted_figure, exit_depth_figure, exit_mass_by_depth, speed_figure, speed_table,
                            text_by_round_html)
from figures.sampled import rounds_length_figure, tev_against_rrs_figure
from figures.siblings import after_pick_figure, sibling_rank_figure
from figures.training import eval_figure, training_curves_figure
from figures.tree import node_table, record_tree_figure, tree_figure, tree_graph, tree_layout
from figures.verifiers import (bench_figures, bench_series, bonus_figure, exit_law_figure, latency_figure,
                               length_histogram_figure)
from figures.workshop import acceptance_figure, coupling_figure, flow_bars_figure

__all__ = [
    "EXIT_COLOUR", "NAIVE_NAME", "PATH_COLOUR", "short", "node_name", "number_text", "p_value_text", "plural",
    "lesson_bars_figure", "predictions_figure", "draws_table", "node_draws_text", "trail_table",
    "after_pick_figure", "sibling_rank_figure", "icicle_figure", "icicle_rows", "record_icicle_figure",
    "next_token_figure", "node_distribution", "timings_figure", "emitted_figure", "exit_depth_figure",
    "exit_mass_by_depth", "speed_figure", "speed_table", "text_by_round_html", "eval_figure",
    "training_curves_figure", "node_table", "record_tree_figure", "tree_figure",
    "tree_graph", "tree_layout", "bench_figures", "bench_series", "bonus_figure", "exit_law_figure", "latency_figure",
    "length_histogram_figure", "flow_bars_figure", "rounds_length_figure", "tev_against_rrs_figure",
    "acceptance_figure", "coupling_figure", "ablation_figure", "arm_colour",
]
