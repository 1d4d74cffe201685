"""Figures from records: every builder returns a plotly figure with the data it claims to draw."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

import appdata
import figures
from tevcore.engine.flow import target_flow
from tevcore.engine.records import STAGES, RoundRecord
from tevcore.room.limits import SINGLE_USER
from tevcore.room.queue import ComputeQueue
from tevcore.studio.reader import read_upload
from tevcore.studio.traces import open_trace
from tevcore.studio.turns import Seat


@pytest.fixture(scope="module")
def records():
    return appdata.synthetic_records(rounds=4, budget=24, seed=3)


def _trace(fig, name_prefix):
    return [t for t in fig.data if (t.name or "").startswith(name_prefix)]


def test_layout_puts_nodes_at_their_depth_and_parents_between_children(records):
    tree = records[0].tree
    pos = figures.tree_layout(tree)
    assert set(pos) == set(range(tree.num_nodes))
    for v in range(tree.num_nodes):
        assert pos[v][0] == int(tree.depths[v])
    for v, kids in enumerate(tree.children()):
        if kids:
            ys = [pos[k][1] for k in kids]
            assert min(ys) - 1e-9 <= pos[v][1] <= max(ys) + 1e-9
    leaves = [v for v, kids in enumerate(tree.children()) if not kids]
    assert len({pos[v][1] for v in leaves}) == len(leaves)  # leaves never overlap


def test_node_table_ranks_siblings_by_draft_score_as_the_lab_does(records):
    tree = records[0].tree
    ranks = figures.node_table(records[0])["rank"].tolist()
    for kids in tree.children():
        best = max(kids, key=lambda k: float(tree.draft_logp[k]), default=None)
        if best is not None:
            assert ranks[best] == 0
        assert sorted(ranks[k] for k in kids) == list(range(len(kids)))


def test_tree_figure_colours_by_P_rings_X_and_marks_path_exit_bonus(records):
    record = records[1]
    fig = figures.record_tree_figure(record, selected=2)
    assert isinstance(fig, go.Figure)
    nodes = _trace(fig, "node")[0]
    assert list(nodes.marker.color) == pytest.approx(record.flow.path_prob.tolist())
    assert list(nodes.customdata) == list(range(record.tree.num_nodes))
    ring = _trace(fig, "exit mass")[0]
    sizes = np.asarray(ring.marker.size)
    assert len(sizes) == record.tree.num_nodes and sizes.min() >= 14  # a ring at every node
    order = np.argsort(record.flow.exit_mass.numpy())
    assert np.all(np.diff(sizes[order]) >= -1e-9)  # bigger X, bigger ring
    assert _trace(fig, "accepted path")
    assert _trace(fig, f"exit node {record.exit_node}")
    assert _trace(fig, "bonus token")
    assert _trace(fig, "selected node 2")
    hover = nodes.hovertext[record.exit_node]
    for word in ("draft log q", "rank", "a =", "P =", "X ="):
        assert word in hover
    assert "top missing" in nodes.hovertext[0]


def test_node_table_has_one_row_per_node_and_sums_to_one(records):
    record = records[0]
    table = figures.node_table(record)
    assert len(table) == record.tree.num_nodes
    assert table["X"].sum() == pytest.approx(1.0, abs=1e-6)
    assert table.loc[table["exit"], "node"].tolist() == [record.exit_node]
    assert table.loc[table["accepted"], "node"].tolist() == record.path
    assert {"token", "log q", "rank", "a", "P", "m", "top missing"} <= set(table.columns)


def test_node_distribution_marks_children_and_missing_and_sums_to_one(records):
    record = records[0]
    rows = figures.node_distribution(record, 0)
    kids = record.tree.children()[0]
    assert (rows["kind"] == "tree child").sum() == len(kids)
    assert (rows["kind"] == "missing").sum() >= 1
    assert rows["prob"].sum() == pytest.approx(1.0, abs=1e-6)
    fig = figures.next_token_figure(rows)
    assert {t.name for t in fig.data} >= {"tree child", "missing"}


def test_round_and_across_round_figures(records):
    assert len(figures.timings_figure(records[0]).data[0].x) == len(STAGES)
    emitted = figures.emitted_figure(records)
    assert list(emitted.data[0].y) == [r.emitted for r in records]
    assert list(emitted.data[1].y) == pytest.approx([r.expected_length for r in records])
    depth = figures.exit_mass_by_depth(records)
    assert depth["mean X"].sum() == pytest.approx(1.0, abs=1e-6)
    assert depth["realised exit frequency"].sum() == pytest.approx(1.0)
    assert len(figures.exit_depth_figure(records).data) == 2
    speed = figures.speed_table(records)
    assert speed["tokens"].iloc[-1] == sum(r.emitted for r in records)
    assert isinstance(figures.speed_figure(records), go.Figure)
    html = figures.text_by_round_html(records)
    assert html.count("<span") == len(records)


def test_text_is_escaped():
    record, _ = appdata.synthetic_record(budget=4)
    record.emitted_text = "<script>alert(1)</script>"
    assert "<script>" not in figures.text_by_round_html([record])


def test_empty_round_list_does_not_break_figures():
    assert isinstance(figures.emitted_figure([]), go.Figure)
    assert isinstance(figures.speed_figure([]), go.Figure)
    assert isinstance(figures.exit_depth_figure([]), go.Figure)


def test_root_only_tree_draws():
    from tevcore.engine.tree import DraftTree

    tree = DraftTree.root_only(3)
    flow = target_flow(tree, torch.randn(1, 10), 1.0)
    fig = figures.tree_figure(tree, flow, ["r"], exit_node=0, bonus_text="x")
    assert _trace(fig, "exit node 0")


def opened(data: bytes, name: str = "trace.jsonl"):
    """An uploaded trace as the pages open it: the studio's capped reader, then its trace service."""
    return open_trace(Seat(SINGLE_USER, ComputeQueue(1), "test"), read_upload(SINGLE_USER, data, name))


def test_trace_round_trip_and_approximate_rows_keep_the_exit_law(records, tmp_path):
    data = appdata.trace_bytes(records, {"prompt": "p"})
    trace = opened(data)
    assert len(trace.rounds) == len(records) and trace.meta == {"prompt": "p"}
    with pytest.raises(ValueError):
        opened(b"not a trace\n")
    compact = appdata.approximate_round(trace.rounds[0])
    assert compact.approximate and compact.vocab_texts[-1] == appdata.OTHER
    flow = target_flow(compact.tree, compact.node_logits, 1.0)
    assert flow.exit_mass.numpy() == pytest.approx(records[0].flow.exit_mass.numpy(), abs=1e-6)
    assert flow.expected_length == pytest.approx(records[0].expected_length, abs=1e-6)


def test_verifier_comparison_figures():
    labels = ["0 root", "1 a", "2 b"]
    law = [0.5, 0.3, 0.2]
    fig = figures.exit_law_figure(labels, law, {"tev": [0.49, 0.31, 0.2], "naive_ratio": [0.2, 0.5, 0.3]})
    assert any("NOT exact" in (t.name or "") for t in fig.data)
    hist = figures.length_histogram_figure({"tev": [0, 0.5, 0.5]}, 1.5, {"tev": 1.5})
    assert hist.data[0].name.startswith("tev")
    assert isinstance(figures.bonus_figure(["x", "y"], [0.6, 0.4], {"tev": [0.58, 0.42]}, "1 a"), go.Figure)
    assert isinstance(figures.latency_figure({"tev": 1e-4, "predraw": 2e-4}), go.Figure)
    rows = pd.DataFrame({"verifier": ["tev", "tev", "chain"], "budget": [8, 64, 8],
                         "speedup": [1.2, 1.5, 1.1], "mean_emitted": [2.0, 3.0, 1.8]})
    speed, emitted = figures.bench_figures(rows)
    assert len(speed.data) == 2 and len(emitted.data) == 2
    trimmed = pd.concat([rows.assign(trim="off"), rows.assign(trim="auto")], ignore_index=True)
    speed, _ = figures.bench_figures(trimmed)  # one line per verifier and trim
    assert sorted(t.name for t in speed.data) == ["chain · trim auto", "chain · trim off", "tev · trim auto",
                                                  "tev · trim off"]


def _result(command: str, rows: list[dict]) -> bytes:
    from tevcore.results import ResultRecord, RunMeta

    return json.dumps(ResultRecord(command, RunMeta.now(f"python -m tevcore {command}", "cpu", 0), rows).to_dict()).encode()


def test_the_app_reads_the_one_result_record_and_draws_only_benchs_speculative_rows():
    bench = appdata.result_file(_result("bench", [{"method": "ours AR", "verifier": None, "budget": None,
                                                   "speedup": 1.0},
                                                  {"method": "spec", "verifier": "tev", "budget": 8, "speedup": 1.3}]),
                                "bench.json")
    timings = appdata.result_file(_result("bench-verifiers", [{"verifier": "tev", "budget": 8,
                                                               "given_flow_median_ms": 0.2}]), "bv.json")
    rows = appdata.bench_rows({"bench.json": bench, "bv.json": timings})
    assert rows["speedup"].tolist() == [1.3] and rows["file"].tolist() == ["bench.json"]
    runs = appdata.runs_frame({"bench.json": bench, "bv.json": timings})
    assert runs["command"].tolist() == ["bench", "bench-verifiers"] and set(runs["seed"]) == {0}
    plain = b'[{"verifier": "tev", "budget": 8, "speedup": 1.3, "mean_emitted": 2.1}]'  # no meta: refused
    for bad in (b"{", b"[]", plain, b'{"meta": {}, "rows": []}'):
        with pytest.raises(ValueError, match="not a JSON file|not a tevcore result"):
            appdata.result_file(bad, "x.json")


def test_the_app_reads_every_committed_result():
    for path in sorted((Path(__file__).resolve().parents[2] / "assets").rglob("*.json")):
        if path.parent.name != "drafter":
            assert appdata.result_file(path.read_bytes(), str(path)).rows


def test_bench_figures_draw_one_coloured_series_per_builder_and_verifier_and_say_the_tree_sizes():
    rows = pd.DataFrame({"verifier": ["tev", "tev", "tev", "tev", "block", "block"],
                         "builder": ["best_first", "best_first", "sampled:1,1,1", "sampled:1,1,1", "sampled:1,1,1",
                                     "sampled:1,1,1"],
                         "budget": [8, 16] * 3, "speedup": [1.4, 1.5, 1.2, 1.3, 1.3, 1.35],
                         "mean_emitted": [2.5, 2.8, 2.0, 2.1, 2.2, 2.3],
                         "mean_tree_size": [8, 16, 3, 3, 3, 3]})
    speed, emitted = figures.bench_figures(rows)
    for fig in (speed, emitted):  # no line joins two builders' rows; tev and block never share a colour
        assert sorted(t.name for t in fig.data) == ["best_first + tev", "sampled:1,1,1 + block", "sampled:1,1,1 + tev"]
        assert all(len(t.x) == 2 for t in fig.data)
        assert len({t.line.color for t in fig.data}) == 3 and fig.layout.showlegend
    sizes = appdata.bench_sizes_text(rows, figures.bench_series(rows))
    assert "sampled:1,1,1 + tev: 3.0 at budget 8, 3.0 at budget 16" in sizes



def test_training_figures():
    metrics = pd.DataFrame({"step": [1, 2, 3], "loss": [3.0, 2.5, 2.0], "distill": [2.9, 2.4, 1.9],
                            "tree": [1.0, 0.9, 0.8], "tree_E": [1.5, 1.6, 1.7], "lr": [1e-4, 2e-4, 3e-4]})
    fig = figures.training_curves_figure(metrics)
    assert {t.name for t in fig.data} == {"loss", "distill", "tree", "tree_E"}
    ev = pd.DataFrame({"checkpoint": ["a", "a", "b"], "budget": [8, 16, 8], "E": [2.0, 2.4, 2.2]})
    assert len(figures.eval_figure(ev).data) == 2
    ev["E s.e."] = [0.1, float("nan"), 0.05]  # one prompt gives no standard error: drawn without a bar
    first = figures.eval_figure(ev).data[0]
    assert list(first.error_y.array) == [0.1, 0.0]
    axis = figures.eval_figure(ev).layout.xaxis  # log axis, ticks on the evaluated budgets only
    assert axis.type == "log" and list(axis.tickvals) == [8, 16] and list(axis.ticktext) == ["8", "16"]
    assert figures.eval_figure(ev.iloc[:0]).layout.xaxis.tickvals == ()  # nothing evaluated yet: no ticks


def test_workshop_presets_build_trees_whose_exit_mass_sums_to_one():
    for name, table in appdata.workshop_presets().items():
        ws = appdata.workshop_tree(table)
        flow = target_flow(ws.tree, ws.node_logits, 1.0)
        assert float(flow.exit_mass.sum()) == pytest.approx(1.0, abs=1e-9), name
        fig = figures.flow_bars_figure(ws.node_labels, flow)
        assert [t.name for t in fig.data] == ["P(v)", "m(v)", "X(v)"]
    chain = appdata.workshop_tree(appdata.workshop_presets()["chain"])
    flow = target_flow(chain.tree, chain.node_logits, 1.0)
    assert flow.expected_length == pytest.approx(1 + 0.8 + 0.8 * 0.7 + 0.8 * 0.7 * 0.6 + 0.8 * 0.7 * 0.6 * 0.5)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.assign(p=t["p"].where(t["token"] != "A", 0.5)), "add up to"),
    (lambda t: t.assign(parent=t["parent"].where(t.index != 0, 99)), "is not a tree node"),
    (lambda t: pd.concat([t, t.iloc[[0]]], ignore_index=True), "unique"),
    (lambda t: t.assign(p=t["p"].where(t.index != 1, 1.5)), "[0, 1]"),
])
def test_workshop_rejects_bad_tables_with_plain_messages(edit, message):
    table = appdata.workshop_presets()["chain"]
    with pytest.raises(ValueError) as err:
        appdata.workshop_tree(edit(table))
    assert message in str(err.value)


def test_record_round_trip_through_dict_keeps_figures_identical(records):
    again = RoundRecord.from_dict(records[0].to_dict())
    a = figures.record_tree_figure(records[0])
    b = figures.record_tree_figure(again)
    assert list(a.data[-1].y) == list(b.data[-1].y)
    assert not math.isnan(float(again.flow.exit_mass.sum()))


def test_icicle_widths_are_P_and_each_gap_is_the_exit_mass(records):
    record = records[2]
    fig = figures.record_icicle_figure(record)
    icicle = fig.data[0]
    assert icicle.type == "icicle" and icicle.branchvalues == "total"
    values = np.asarray(icicle.values, dtype=float)
    assert values == pytest.approx(record.flow.path_prob.double().numpy(), abs=1e-12)  # width = P(v)
    parents = [int(p) if p else -1 for p in icicle.parents]
    children_sum = np.zeros(len(values))
    for v, p in enumerate(parents):
        if p >= 0:
            children_sum[p] += values[v]
    assert values - children_sum == pytest.approx(record.flow.exit_mass.double().numpy(), abs=1e-9)  # gap = X(v)
    assert list(icicle.marker.colors) == pytest.approx(record.flow.exit_mass.tolist())  # coloured by X
    assert icicle.labels[record.exit_node].startswith("★")
    path_lines = [icicle.marker.line.color[v] for v in record.path if v != record.exit_node]
    assert set(path_lines) <= {figures.PATH_COLOUR}
    assert icicle.marker.line.color[record.exit_node] == figures.EXIT_COLOUR


def test_icicle_never_lets_children_outgrow_their_parent():
    from tevcore.engine.tree import DraftTree

    tree = DraftTree(tokens=torch.tensor([0, 1, 2]), parents=torch.tensor([-1, 0, 0]), draft_logp=torch.zeros(3))
    logits = torch.full((3, 3), -1e9)
    logits[0, 1] = logits[0, 2] = 0.0  # the root's whole mass goes to its two children: m(root) = 1
    flow = target_flow(tree, logits.log_softmax(-1), 1.0)
    rows = figures.icicle_rows(tree, flow, ["r", "a", "b"])
    assert rows.loc[0, "value"] >= rows.loc[1:, "value"].sum()


def _labels_by_node(fig) -> dict[tuple[float, float], list]:
    out: dict[tuple[float, float], list] = {}
    for note in fig.layout.annotations:
        out.setdefault((note.x, note.y), []).append(note)
    return out


def _marker_sizes_at(fig, x: float, y: float) -> list[float]:
    """Diameters (px) of every marker drawn at (x, y), over all marker traces."""
    sizes = []
    for t in fig.data:
        if t.mode is None or "markers" not in t.mode or t.x is None:
            continue
        size = t.marker.size if t.marker.size is not None else 6
        for i, (tx, ty) in enumerate(zip(t.x, t.y)):
            if tx == x and ty == y:
                s = size[i] if isinstance(size, (list, tuple)) else size
                line = t.marker.line.width or 0 if t.marker.line is not None else 0
                sizes.append(float(s) + float(line))
    return sizes


@pytest.mark.parametrize("budget", [16, 64, 128])
def test_big_trees_label_every_drawn_node_beside_its_markers_and_fold_low_P_fans(budget):
    record = appdata.synthetic_records(rounds=1, budget=budget, seed=5)[0]
    tree, P = record.tree, record.flow.path_prob.numpy()
    selected = int(np.argmin(P))  # the least likely node: drawn although its fan folds
    fig = figures.record_tree_figure(record, selected=selected, fan=2)
    nodes = _trace(fig, "node")[0]
    drawn = [int(v) for v in nodes.customdata]
    assert set(record.path) | {selected} <= set(drawn)
    parents = tree.parents.tolist()
    assert all(parents[v] in drawn for v in drawn if v)  # still one tree
    folds = _trace(fig, "folded siblings")
    assert folds, "a budget of 16 or more folds some fan at fan = 2"
    folded = figures.folding.fold_fans(tree, record.flow, 2, record.path + [record.exit_node, selected])[1]
    forced = set(record.path) | set(tree.path(selected))  # drawn whatever their P: the path, the chosen node
    assert [f"more:{f.parent}" for f in folded] == list(folds[0].customdata)
    for f in folded:  # every node is drawn or folded, once
        kids = [k for k in tree.children()[f.parent]]
        assert set(f.children) | {k for k in kids if k in drawn} == set(kids)
        assert f.mass == pytest.approx(P[list(f.children)].sum())
        chosen = [k for k in kids if k in drawn and k not in forced]
        assert not chosen or all(P[c] <= min(P[chosen]) + 1e-12 for c in f.children)  # folded: the least likely
    assert len(drawn) + sum(f.hidden for f in folded) == tree.num_nodes
    # one label per drawn node and per fold, starting right of every marker drawn at that point
    labels = _labels_by_node(fig)
    points = list(zip(nodes.x, nodes.y)) + list(zip(folds[0].x, folds[0].y))
    assert all(len(labels[p]) == 1 for p in points)
    for x, y in points:
        note = labels[(x, y)][0]
        assert note.xanchor == "left" and not note.showarrow
        assert note.xshift >= max(_marker_sizes_at(fig, x, y)) / 2 + 2, (x, y)  # clear of the star and square
    assert any(note.text.startswith("+") and "more (sum P = " in note.text for note in fig.layout.annotations)
    # a leaf row is tall enough for a label: labels in one column never touch
    rows = 1 + max(-y for y in nodes.y)
    px_per_row = (fig.layout.height - 200) / rows
    assert px_per_row >= figures.tree.LABEL_FONT * 1.5
    # the bonus sits in a column of its own, after every drawn node
    bonus = _trace(fig, "bonus token")[0]
    assert bonus.x[0] >= max(nodes.x) + 1
    # one node count: the title counts draft nodes as the budget does
    assert f"{tree.size} nodes" in fig.layout.title.text and f"of {tree.size} nodes" in fig.layout.title.text
    # opening a fan draws its children
    first = folded[0]
    opened = figures.record_tree_figure(record, selected=selected, fan=2, opened=[first.parent])
    assert set(first.children) <= set(int(v) for v in _trace(opened, "node")[0].customdata)


def test_small_trees_fold_nothing(records):
    fig = figures.record_tree_figure(records[0], fan=4)
    shown, folds = figures.folding.fold_fans(records[0].tree, records[0].flow, None)
    assert len(shown) == records[0].tree.num_nodes and not folds
    assert len(_trace(fig, "node")[0].customdata) >= 1


NUMERIC_LOOKING = ["'", "  ", "7", "7 ", " #23", "$5", "12%", "1,000", "-3"]


def _bars_all_on_a_category_axis(fig, count: int) -> None:
    axis = fig.layout.xaxis
    assert axis.type == "category"
    categories = list(axis.categoryarray)
    assert len(set(categories)) == len(categories) == count  # no two labels merge
    for trace in fig.data:
        assert set(trace.x) <= set(categories)  # every bar and marker sits on the axis


def test_token_charts_keep_every_numeric_looking_label_on_a_category_axis():
    tokens = NUMERIC_LOOKING
    rows = pd.DataFrame({"token": tokens, "token_id": [23, 216, 7, 8, 23, 9, 10, 11, 12],
                         "prob": np.linspace(0.3, 0.02, len(tokens)), "kind": ["tree child"] * 3 + ["missing"] * 6})
    fig = figures.next_token_figure(rows)
    _bars_all_on_a_category_axis(fig, len(tokens))
    labels = [figures.short(t, 10) for t in tokens]
    assert labels[2] != labels[3]  # '7' and '7 ' read apart ('7␣')
    law = np.linspace(0.3, 0.01, len(tokens))
    _bars_all_on_a_category_axis(figures.bonus_figure(labels, law, {"tev": law, "naive_ratio": law}), len(tokens))
    node_labels = [f"{i} {label}" for i, label in enumerate(labels)]
    _bars_all_on_a_category_axis(figures.exit_law_figure(node_labels, law, {"tev": law}), len(tokens))
    raw = ["' #23", "  #216", "'7'", "'7 '"]  # as the issue saw them, and a repeat that must stay apart
    _bars_all_on_a_category_axis(figures.exit_law_figure(raw + ["'7'"], np.arange(5.0), {}), 5)
    ws = appdata.workshop_tree(pd.DataFrame({"node": [1, 2, 3, 4], "parent": [0, 0, 0, 0],
                                             "token": ["7", "7 ", " #23", "'"], "p": [0.2] * 4,
                                             "in tree": [True] * 4}))
    flow = target_flow(ws.tree, ws.node_logits, 1.0)
    _bars_all_on_a_category_axis(figures.flow_bars_figure(ws.node_labels, flow), ws.tree.num_nodes)


def test_verifier_charts_draw_the_foil_under_the_exact_verifiers():
    fig = figures.exit_law_figure(["0 root", "1 a"], [0.6, 0.4], {"tev": [0.6, 0.4], "naive_ratio": [0.5, 0.5]},
                                  law_name="exit law X(v) at T = 1")
    names = [t.name for t in fig.data]
    assert names == ["exit law X(v) at T = 1", "naive_ratio (NOT exact)", "tev"]  # drawn in this order
    foil, tev = fig.data[1].marker, fig.data[2].marker
    assert foil.symbol.endswith("open")  # the exact marker inside it stays visible
    assert not tev.symbol.endswith("open") and tev.size < foil.size
    hist = figures.length_histogram_figure({"tev": [0, 0.4, 0.6], "greedy": [0, 0, 1.0]}, 1.6,
                                           {"tev": 1.61, "greedy": 2.0},
                                           groups={"tev": "optimal", "greedy": "exact for T = 0 only"})
    assert {t.legendgroup for t in hist.data} == {"optimal", "exact for T = 0 only"}
    line = hist.layout.shapes[0]
    assert line.x0 == line.x1 == 1.6 and line.xref == "x"  # the 1 + C mark at its value, on the means' strip
    means = {t.y[0]: t.x[0] for t in hist.data if t.type == "scatter"}
    assert means == {"tev": 1.61, "greedy": 2.0}  # each mean where its value is, beside the 1 + C line


def test_bench_axis_ticks_sit_on_the_measured_budgets():
    rows = pd.DataFrame({"verifier": ["tev"] * 4, "budget": [16, 32, 64, 128], "speedup": [1.1, 1.3, 1.4, 1.2],
                         "mean_emitted": [2.0, 2.4, 2.8, 3.0]})
    for fig in figures.bench_figures(rows):
        assert fig.layout.xaxis.type == "log"
        assert list(fig.layout.xaxis.tickvals) == [16, 32, 64, 128]
        assert list(fig.layout.xaxis.ticktext) == ["16", "32", "64", "128"]


def test_an_unreadable_upload_names_the_users_file():
    with pytest.raises(ValueError) as err:
        opened(b'{"schema": "not a trace"}\n', "my-run.jsonl")
    assert "upload" not in str(err.value) and "/tmp" not in str(err.value)


@pytest.mark.parametrize("order", [[1, 0, 2, 3], [0, 1, 1, 2], [3, 2, 1, 0]])
def test_an_upload_with_rounds_out_of_order_is_never_replayed(records, order):
    """The explorer replays a trace round by round: rounds out of order or repeated are refused, naming the upload."""
    lines = appdata.trace_bytes(records).decode().splitlines()
    shuffled = "\n".join([lines[0]] + [lines[1 + i] for i in order]) + "\n"
    with pytest.raises(ValueError, match="^my-run.jsonl, line .*rounds must be in increasing order"):
        opened(shuffled.encode(), "my-run.jsonl")
    assert [r.index for r in opened(appdata.trace_bytes(records)).rounds] == [0, 1, 2, 3]


def test_top_shares_keep_the_picked_bars_and_put_the_rest_in_one():
    from figures.common import top_shares

    assert top_shares([0.5, 0.1, 0.3, 0.1], [0, 2]) == pytest.approx([0.5, 0.3, 0.2])
    assert top_shares([0.7, 0.4], [0, 1])[-1] == 0.0  # rounding past 1 never gives a negative rest
