"""read_trace over mutated valid traces (hypothesis): a clear ValueError, or a round the CLI table can draw.

A mutation replaces one value anywhere in a round's JSON with another JSON
value (numbers with NaN and infinities, strings, lists, objects, null) or
deletes a key. Either read_trace refuses the file with a ValueError naming
the file and the round, or every round it returns satisfies the invariants the
app and `print_round` rely on, and prints.
"""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tevcore.cli import print_round
from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, StageTimings, write_trace
from tevcore.verify.trace_checks import read_trace  # the reader every front end uses: each round checked by its rule
from tevcore.verify.verifiers import get_verifier

VOCAB = 9
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.integers(-3, 2**40) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=6)


def _record(seed: int) -> RoundRecord:
    generator = torch.Generator().manual_seed(seed)
    tree = best_first(1, torch.log_softmax(torch.randn(3, VOCAB, generator=generator), -1), 5)
    logits = 2 * torch.randn(tree.num_nodes, VOCAB, generator=generator)
    flow = target_flow(tree, logits, 1.0, 2)
    verdict = get_verifier("tev")(tree, logits, 1.0, generator)
    return RoundRecord(index=0, proposer="p", builder="best_first", budget=5, temperature=1.0, context_length=3,
                       tree=tree, flow=flow, token_texts=[str(t) for t in tree.tokens.tolist()],
                       missing_texts=[[str(t) for t in row] for row in flow.missing_tokens.tolist()],
                       verifier="tev", path=verdict.path, exit_node=verdict.exit_node,
                       bonus_token=verdict.bonus_token, bonus_text="b",
                       emitted_tokens=tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token],
                       timings=StageTimings())


VALID = _record(0).to_dict()


def _places(value, prefix=()):
    """Every (container path, key) in a JSON value."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return []
    out = []
    for key, child in items:
        out.append((prefix, key))
        out.extend(_places(child, prefix + (key,)))
    return out


PLACES = _places(VALID)
BY_FIELD = {field: [place for place in PLACES if (place[0][:1] or (place[1],)) == (field,)] for field in VALID}


@st.composite
def mutated_rounds(draw):
    data = json.loads(json.dumps(VALID))
    for _ in range(draw(st.integers(1, 3))):
        prefix, key = draw(st.sampled_from(BY_FIELD[draw(st.sampled_from(sorted(BY_FIELD)))]))
        container = data
        try:
            for step in prefix:
                container = container[step]
            if draw(st.booleans()) and isinstance(container, dict):
                container.pop(key, None)
            else:
                container[key] = draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this place
    return data


def _drawable(record: RoundRecord) -> None:
    tree, flow = record.tree, record.flow
    n = tree.num_nodes
    assert len(record.token_texts) == n == len(record.missing_texts) == flow.missing_tokens.shape[0]
    for name in ("edge_prob", "path_prob", "child_mass", "exit_mass"):
        values = getattr(flow, name)
        assert values.shape == (n,) and bool(torch.isfinite(values).all())
    if record.path:
        assert record.path[0] == 0 and record.exit_node == record.path[-1]
        assert all(0 < c < n and int(tree.parents[c]) == p for p, c in zip(record.path, record.path[1:]))
        exit_children = tree.tokens[1:][tree.parents[1:] == record.exit_node].tolist()
        assert isinstance(record.bonus_token, int) and record.bonus_token not in exit_children
    with redirect_stdout(io.StringIO()):
        print_round(record)


SMALL = st.integers(-1, VOCAB + 1)
VERDICT_VALUES = {"path": st.lists(SMALL, max_size=4), "exit_node": SMALL, "bonus_token": SMALL,
                  "emitted_tokens": st.lists(SMALL, max_size=3)}


@st.composite
def mutated_verdicts(draw):
    """The verdict fields set to small, plausible-looking values: the mutations most likely to slip through."""
    data = json.loads(json.dumps(VALID))
    for field in draw(st.sets(st.sampled_from(sorted(VERDICT_VALUES)), min_size=1)):
        data[field] = draw(VERDICT_VALUES[field])
    return data


@pytest.mark.parametrize("strategy", [mutated_rounds(), mutated_verdicts()], ids=["anywhere", "verdict"])
def test_a_mutated_round_is_refused_clearly_or_drawable(strategy, tmp_path_factory):
    @settings(max_examples=60, deadline=None)
    @given(data=strategy)
    def check(data):
        _check_mutated(data, tmp_path_factory)

    check()


def _check_mutated(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    header = json.dumps({"schema": "tevcore.trace", "version": 1, "meta": {}})
    path.write_text(header + "\n" + json.dumps(data) + "\n")
    try:
        trace = read_trace(path, name="shown.jsonl")
    except ValueError as err:
        assert str(err).startswith("shown.jsonl, line 2 (round 0): corrupt round record")
        return
    for record in trace.rounds:
        _drawable(record)


def test_the_unmutated_round_reads_back(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [_record(1)])
    _drawable(read_trace(path).rounds[0])
    assert not math.isnan(read_trace(path).rounds[0].expected_length)
