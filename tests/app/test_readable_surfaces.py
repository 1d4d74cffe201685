"""The teaching surfaces read as a newcomer reads them: tiny probabilities and p-values in scientific notation
(not 0.0000), plurals that agree with their count, the root named as the context's last token, and a colour
legend by standing in the across-rounds chart."""

from __future__ import annotations

import appdata
import figures


def test_tiny_values_are_in_scientific_notation_and_an_underflowed_p_value_says_so():
    assert figures.number_text(0.25) == "0.2500"
    assert figures.number_text(3.2e-7) == "3.20e-07"
    assert figures.number_text(0.0) == "0"
    assert figures.p_value_text(1.5e-12) == "1.50e-12" and figures.p_value_text(0.0) == "< 1e-300"


def test_plurals_agree_with_their_count():
    assert figures.plural(1, "round") == "1 round" and figures.plural(3, "round") == "3 rounds"
    assert f"drew {figures.plural(1, 'time')}" == "drew 1 time"
    assert figures.plural(2, "distinct child", "distinct children") == "2 distinct children"


def test_the_trees_hover_names_the_root_as_the_contexts_last_token_and_shows_tiny_p_in_scientific_notation():
    record = appdata.synthetic_record(budget=24, seed=3)[0]
    fig = figures.record_tree_figure(record)
    hover = next(t for t in fig.data if (t.name or "").startswith("node")).hovertext
    assert hover[0].startswith(f"<b>root (the context&#x27;s last token {record.token_texts[0]!r}".replace("'", "&#x27;"))
    tiny = [v for v in range(record.tree.num_nodes) if 0 < float(record.flow.path_prob[v]) < 1e-4]
    assert tiny, "the synthetic round has no node with a tiny P to show"
    for v in tiny:
        assert "P = 0.0000" not in hover[v] and "e-" in hover[v].split("P = ")[1].split("<br>")[0]
    assert figures.node_name(7, " your") == "7: ' your'"


def test_the_across_rounds_chart_has_a_colour_legend_by_standing():
    fig = figures.rounds_length_figure({"tev": (2.0, 0.01), "rrs": (2.2, 0.02), "naive_ratio": (2.4, 0.02)},
                                       (2.0, 0.01))
    legend = {t.name: t.marker.color for t in fig.data if t.showlegend is not False}
    assert fig.layout.showlegend and fig.layout.legend.title.text == "colour = standing"
    assert set(legend) == {"exact given the tree (optimal: its E[L] is 1 + C)", "exact over the tree's draws",
                           "NOT exact (teaching foil)"}
    points = fig.data[0].marker.color  # each point has its standing's colour, as the legend says
    assert list(points) == [legend["exact given the tree (optimal: its E[L] is 1 + C)"],
                            legend["exact over the tree's draws"], legend["NOT exact (teaching foil)"]]
