"""Trace files: round trip (plain and gzip) and clear errors for bad files."""

import gzip
import json

import pytest
import torch

from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.engine.records import SCHEMA, SCHEMA_VERSION, RoundRecord, StageTimings, read_trace, write_trace

VOCAB = 10


def make_record(index, temperature, budget=7):
    generator = torch.Generator().manual_seed(index)
    tree = best_first(2, torch.log_softmax(torch.randn(3, VOCAB, generator=generator), -1), budget)
    flow = target_flow(tree, 3 * torch.randn(tree.num_nodes, VOCAB, generator=generator), temperature, 3)
    return RoundRecord(
        index=index, proposer="stand-in", builder="best_first", budget=budget, temperature=temperature,
        context_length=11 + index, tree=tree, flow=flow,
        token_texts=[f"tok{t}" for t in tree.tokens.tolist()],
        missing_texts=[[f"m{t} é\n\"" for t in row] for row in flow.missing_tokens.tolist()],
        verifier="exact", path=tree.path(tree.size), exit_node=tree.size, bonus_token=4, bonus_text="b",
        emitted_tokens=tree.tokens[tree.path(tree.size)[1:]].tolist() + [4], emitted_text="x y",
        timings=StageTimings(draft=0.5, commit=0.25),
    )


RECORDS = [make_record(0, 1.0), make_record(1, 0.0), make_record(2, 0.5, budget=0)]


@pytest.fixture(params=["trace.jsonl", "trace.jsonl.gz"])
def trace_path(request, tmp_path):
    return write_trace(tmp_path / request.param, RECORDS, meta={"prompt": "hi", "seed": 3})


def test_round_trip(trace_path):
    assert not list(trace_path.parent.glob("*.partial"))
    trace = read_trace(trace_path)
    assert trace.meta == {"prompt": "hi", "seed": 3}
    assert len(trace.rounds) == len(RECORDS)
    for got, want in zip(trace.rounds, RECORDS):
        assert got.to_dict() == want.to_dict()  # every field, floats bit-exact, -inf kept
        for name in ("tokens", "parents", "draft_logp", "depths"):
            assert torch.equal(getattr(got.tree, name), getattr(want.tree, name))
        assert torch.equal(got.flow.exit_mass, want.flow.exit_mass)
        assert got.emitted == want.emitted == len(want.path)
        assert got.expected_length == want.expected_length


def test_gzip_file_is_gzip(tmp_path):
    path = write_trace(tmp_path / "t.jsonl.gz", RECORDS)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        assert json.loads(handle.readline())["schema"] == SCHEMA


def test_flow_recomputable_from_stored_data(trace_path):
    for rnd in read_trace(trace_path).rounds:
        tree, flow = rnd.tree, rnd.flow
        path_prob = torch.ones(tree.num_nodes, dtype=torch.float64)
        for v in range(1, tree.num_nodes):
            path_prob[v] = path_prob[int(tree.parents[v])] * flow.edge_prob[v]
        assert torch.allclose(path_prob, flow.path_prob, rtol=1e-12, atol=1e-15)
        children = tree.children()
        for v in range(tree.num_nodes):
            child_mass = float(sum(flow.edge_prob[c] for c in children[v]))
            assert float(flow.exit_mass[v]) == pytest.approx(float(flow.path_prob[v]) * (1 - child_mass), abs=1e-9)
        assert float(flow.exit_mass.sum()) == pytest.approx(1.0, abs=1e-9)


def write_lines(path, lines):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return path


HEADER = json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION, "meta": {}})
GOOD = json.dumps(RECORDS[0].to_dict())


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "empty"),
        (["", "   "], "empty"),
        (["not json at all"], "first line is not JSON"),
        (['{"rounds": []}'], "not a tevcore trace file"),
        (["[1, 2, 3]"], "not a tevcore trace file"),
        ([json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION + 1})], "schema version 2"),
        ([json.dumps({"schema": SCHEMA})], "schema version None"),
        ([HEADER, GOOD[: len(GOOD) // 2]], "line 2"),
        ([HEADER, GOOD, "{"], "line 3"),
        ([HEADER, GOOD, '{"index": 0}'], "line 3"),
        ([HEADER, "[1, 2]"], "line 2"),
        ([HEADER, '"text"'], "line 2"),
        ([HEADER, json.dumps({**RECORDS[0].to_dict(), "surprise": 1})], "line 2"),
        ([HEADER, json.dumps({**RECORDS[0].to_dict(), "tree": RECORDS[2].tree.to_dict()})], "disagree"),
    ],
)
@pytest.mark.parametrize("name", ["bad.jsonl", "bad.jsonl.gz"])
def test_bad_files_raise_clear_value_error(tmp_path, name, lines, message):
    path = write_lines(tmp_path / name, lines)
    with pytest.raises(ValueError, match=message) as info:
        read_trace(path)
    assert str(path) in str(info.value)
    error = info.value  # no chained "during handling of the above exception" traceback
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


def test_truncated_gzip(tmp_path):
    path = write_trace(tmp_path / "t.jsonl.gz", RECORDS * 5)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable trace file"):
        read_trace(path)


@pytest.mark.parametrize("name", ["plain.jsonl.gz", "binary.jsonl"])
def test_wrong_encoding(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(HEADER.encode() + b"\n" if name.endswith(".gz") else b"\xff\xfe\x00garbage\n")
    with pytest.raises(ValueError, match="not a readable trace file"):
        read_trace(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path)  # a directory is not a trace file


# ---------------------------------------------------------------- order and encoding of a whole trace
def _lines(indices: list[int]) -> list[str]:
    header = json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION, "meta": {}})
    return [header] + [json.dumps(make_record(i, 1.0).to_dict()) for i in indices]


@pytest.mark.parametrize("indices, line, message", [
    ([0, 0], 3, "round index 0 repeats round 0"),
    ([1, 0], 3, "round index 0 comes after round 1"),
    ([0, 2, 1], 4, "round index 1 comes after round 2"),
    ([0, 1, 2, 2], 5, "round index 2 repeats round 2"),
    ([3, 1, 2], 3, "round index 1 comes after round 3"),
])
def test_rounds_out_of_order_or_repeated_are_refused_naming_file_and_line(indices, line, message, tmp_path):
    path = tmp_path / "joined.jsonl"
    path.write_text("\n".join(_lines(indices)) + "\n")
    with pytest.raises(ValueError, match=f"^{path}, line {line} \\(round {line - 2}\\): .*{message}.*increasing"):
        read_trace(path)


def test_rounds_in_increasing_order_with_gaps_are_read(tmp_path):
    """A trace cut down by hand (some rounds dropped) still replays in its order."""
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(_lines([0, 2, 5])) + "\n")
    assert [r.index for r in read_trace(path).rounds] == [0, 2, 5]


def test_two_traces_joined_into_one_file_are_refused_at_the_second_header(tmp_path):
    path = tmp_path / "cat.jsonl"
    path.write_text("\n".join(_lines([0, 1]) + _lines([0])) + "\n")
    with pytest.raises(ValueError, match="cat.jsonl, line 4 \\(round 2\\): a second trace header"):
        read_trace(path)


@pytest.mark.parametrize("name", ["bom.jsonl", "bom.jsonl.gz"])
def test_a_trace_saved_with_a_byte_order_mark_is_read(name, tmp_path):
    data = ("\ufeff" + "\n".join(_lines([0, 1])) + "\n").encode("utf-8")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    assert [r.index for r in read_trace(path).rounds] == [0, 1]


def test_a_trace_that_is_not_utf8_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "latin1.jsonl"
    header = json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION, "meta": {"prompt": "caf\u00e9"}},
                        ensure_ascii=False)
    path.write_bytes(header.encode("latin-1") + b"\n" + _lines([0])[1].encode())
    with pytest.raises(ValueError, match=f"{path} is not a readable trace file"):
        read_trace(path)


def test_a_small_gzip_that_expands_past_the_limit_is_refused(tmp_path):
    """A few KiB of gzip that inflate to many MiB stop at the reader's limit, naming the file, whole-line or not."""
    import gzip

    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(HEADER + "\n")
        handle.write(" " * (8 << 20) + "\n")  # one blank 8 MiB line: no parser would ever see it
    assert path.stat().st_size < 64 << 10
    with pytest.raises(ValueError, match=r"bomb\.jsonl\.gz holds more than 2 MiB"):
        read_trace(path, max_text_bytes=2 << 20)
    assert read_trace(write_trace(tmp_path / "ok.jsonl.gz", RECORDS), max_text_bytes=2 << 20).rounds
