"""Figures of sampled rounds: the draws table, draw text in hover and panel, the rrs and block trail tables, sibling
bars."""

from __future__ import annotations

import pandas as pd
import pytest

import appdata
import figures
from tevcore.lab.siblings import sibling_diagnostics


@pytest.fixture(scope="module")
def sampled():
    return [appdata.synthetic_record(budget=14, seed=20 + i, index=i, builder="sampled:4,2,2", verifier="rrs")
            for i in range(6)]


def test_draws_table_lists_every_draw_in_order_with_its_q(sampled):
    record = sampled[0][0]
    draws = record.tree.draws
    table = figures.draws_table(record)
    assert table["at node"].tolist() == draws.parents.tolist()
    assert table["child"].tolist() == draws.children.tolist()
    assert table["q"].tolist() == draws.q.tolist()
    for node, rows in table.groupby("at node"):
        assert rows["draw at node"].tolist() == list(range(len(rows)))
    assert set(table.loc[table["accepted child"], "child"]) == set(record.path[1:])
    fixed = appdata.synthetic_record(budget=6)[0]
    assert figures.draws_table(fixed).empty and figures.node_draws_text(fixed.tree, 1) == ""


def test_a_repeated_draw_names_every_order_it_was_drawn_in(sampled):
    for record, _ in sampled:
        draws = record.tree.draws
        for node in range(1, record.tree.num_nodes):
            parent = int(record.tree.parents[node])
            made, q = draws.at(parent)
            orders = [i + 1 for i, child in enumerate(made) if child == node]
            text = figures.node_draws_text(record.tree, node)
            assert text.startswith(f"drawn at node {parent} as draw {', '.join(map(str, orders))} of {len(made)}")
            assert f"q = {q[made.index(node)]:.4f}" in text
    assert any(len(set(d.at(0)[0])) < len(d.at(0)[0]) for d in (r.tree.draws for r, _ in sampled))  # repeats seen


def test_the_tree_hover_says_how_each_node_was_drawn(sampled):
    fig = figures.record_tree_figure(sampled[0][0])
    nodes = next(t for t in fig.data if (t.name or "").startswith("node"))
    assert all("drawn at node" in text for text in nodes.hovertext[1:])
    fixed = figures.record_tree_figure(appdata.synthetic_record(budget=6)[0])
    fixed_nodes = next(t for t in fixed.data if (t.name or "").startswith("node"))
    assert not any("drawn at node" in text for text in fixed_nodes.hovertext)


def test_trail_table_follows_the_trail_and_ends_at_the_exit_and_bonus(sampled):
    record, logits = sampled[1]
    trail = appdata.round_trail(record, logits).trail
    table = figures.trail_table(trail, record.tree, record.token_texts, record.bonus_text)
    assert len(table) == len(trail.steps) + 1
    assert [0] + table.loc[table["outcome"] == "accepted", "child"].tolist() == record.path
    assert table["acceptance probability"].iloc[:-1].tolist() == [s.accept_prob for s in trail.steps]
    assert table["outcome"].iloc[-1].startswith(f"exit at node {record.exit_node}")
    assert table["token"].iloc[-1] == f"bonus {record.bonus_text!r}"


def test_a_block_rounds_trail_table_is_its_own_verdicts_chain_and_a_tev_round_gets_a_fresh_rrs_one():
    seen = set()
    for seed in range(8):
        record, logits = appdata.synthetic_record(budget=8, seed=seed, builder="sampled:1,1,1,1,1", verifier="block")
        result = appdata.round_trail(record, logits)
        assert result.rule == "block" and result.recorded and result.trail.path == record.path
        table = figures.trail_table(result.trail, record.tree, record.token_texts, record.bonus_text)
        assert table["chain node"].iloc[:-1].tolist() == list(range(1, record.tree.num_nodes))
        assert table["weight w"].iloc[:-1].tolist() == [s.weight for s in result.trail.steps]
        assert table["token"].iloc[-1] == f"bonus {record.bonus_text!r}"
        seen.add(result.trail.exit_node)
    assert len(seen) >= 2
    record, logits = appdata.synthetic_record(budget=8, seed=1, builder="sampled:1,1,1,1,1", verifier="tev")
    fresh = appdata.round_trail(record, logits, seed=3)
    assert fresh.rule == "rrs" and not fresh.recorded


def test_sibling_bars_are_the_labs_shares_on_categorical_depth_axes(sampled):
    records = [record for record, _ in sampled]
    by_rank, after = appdata.siblings_frames(records)
    diagnostics = sibling_diagnostics(records)
    assert by_rank.to_dict("records") == diagnostics["by_rank"]
    fig = figures.sibling_rank_figure(by_rank)
    assert fig.layout.xaxis.type == "category"
    for trace in fig.data:
        rank = int(trace.name.split()[1].rstrip("+"))
        for depth_label, share in zip(trace.x, trace.y):
            depth = int(depth_label.split()[1])
            rows = by_rank[(by_rank["depth"] == depth) & (by_rank["rank"].clip(upper=4) == rank)]
            assert share == pytest.approx(rows["accepted"].sum() / rows["nodes"].sum())
    picks = figures.after_pick_figure(after)
    assert picks.layout.xaxis.type == "category"
    shown = {(trace.name, x): y for trace in picks.data for x, y in zip(trace.x, trace.y)}
    assert shown == {(f"after a {r['pick']} pick", f"depth {r['depth']}"): pytest.approx(r["share"])
                     for r in diagnostics["after_pick"]}
    empty = pd.DataFrame(columns=by_rank.columns)
    assert not figures.sibling_rank_figure(empty).data
    assert not figures.after_pick_figure(pd.DataFrame(columns=after.columns)).data
