"""`tevcore rounds-at-context`: the table and JSON of fresh sampled trees at one context, on a tiny target."""

from __future__ import annotations

from itertools import islice

import pytest

from tevcore.cli import main
from tevcore.config import DecodeConfig
from tevcore.decoding.loop import prompt_ids, rounds
from tevcore.engine.builder_specs import parse_builder
from tevcore.lab.context_rounds import rounds_at_context
from tevcore.lab.simulate import verify_rounds
from tevcore.proposers import resolve_proposer
from tevcore.results import read_result
from tevcore.target.loading import load_target

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.fixture(scope="module")
def tiny(tiny_model_folder) -> str:
    return str(tiny_model_folder("llama"))


def _run(tiny: str, extra: list[str], capsys) -> tuple[int, str, str]:
    code = main(["rounds-at-context", "--prompt", "hello there", "--target", tiny, "--proposer", "rollout",
                 "--device", "cpu", "--budget", "6", "--rounds", "30", "--seed", "2", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_rule_paired_with_the_builder_is_summarised_as_the_engine_computes_it(tiny, tmp_path, capsys):
    out = tmp_path / "rounds.json"
    code, printed, err = _run(tiny, ["--builder", "sampled:2,1", "--at-round", "2", "--out", str(out)], capsys)
    assert code == 0, err
    data = read_result(out).to_dict()
    assert data["command"] == "rounds-at-context" and data["meta"]["seed"] == 2
    rows = {row["verifier"]: row for row in data["rows"]}
    assert list(rows) == ["tev", "predraw", "residual", "greedy", "chain", "naive_ratio", "rrs"]  # block: no chain
    assert rows["rrs"]["standing"] == "exact over the draws" and rows["naive_ratio"]["standing"] == "not exact"
    # the same numbers from the engine, at the context two best-first + tev rounds leave
    target = load_target(tiny, device="cpu")
    proposer = resolve_proposer("rollout", target)
    ids = prompt_ids(target, "hello there")
    config = DecodeConfig(max_new_tokens=2 * (proposer.depth + 1), temperature=1.0, budget=6, seed=2)
    earlier = list(islice(rounds(target, proposer, ids, config), 2))
    context = ids + [t for r in earlier for t in r.emitted_tokens]
    assert data["settings"]["context_length"] == len(context) > len(ids)
    drawn = rounds_at_context(target, proposer, context, parse_builder("sampled:2,1"), 6, 1.0, 30, 2)
    found = verify_rounds(list(rows), drawn.rounds, 1.0, 2)
    for name, result in found.items():
        assert rows[name]["mean_emitted"] == pytest.approx(result.mean_emitted()[0])
        assert rows[name]["first_token_p"] == pytest.approx(result.first_token_pvalue(drawn.context_probs))
    assert data["summary"]["best_first_length"] == pytest.approx(drawn.best_first_length)
    assert "30 trees of sampled:2,1 (budget 6, T = 1)" in printed and f"wrote {out}" in err
    assert sum(line.startswith(("tev ", "rrs ", "naive_ratio ")) for line in printed.splitlines()) == 3


@pytest.mark.parametrize("extra, message", [
    (["--builder", "best_first"], "builds fixed trees"),
    (["--builder", "sampled:2,2", "--verifiers", "block"], "verifies a chain drawn one draw per node"),
    (["--builder", "sampled:2", "--verifiers", "tev,nope"], "unknown verifier 'nope'"),
    (["--builder", "sampled:1,1,1,1,1"], "needs 5 draft depths"),
    (["--at-round", "-1"], "--at-round must be 0 or more"),
    (["--at-round", "400"], "--at-round 400: 400 rounds may need"),  # past the tiny model's 512 tokens
])
def test_bad_settings_get_one_line_and_exit_code_2(tiny, capsys, extra, message):
    code, _, err = _run(tiny, extra, capsys)
    said = [line for line in err.splitlines() if line.strip() and not line.startswith("Loading weights")]  # bars
    assert code == 2 and said == [said[0]] and said[0].startswith("error: ") and message in said[0], err


def test_each_design_is_set_against_its_own_ceiling_per_depth(tiny, tmp_path, capsys):
    out = tmp_path / "mixed.json"
    code, printed, err = _run(tiny, ["--builder", "mixed:3,2", "--out", str(out)], capsys)
    assert code == 0, err
    ceilings = read_result(out).to_dict()["summary"]["ceilings"]
    drawn, fixed = ceilings["mixed:3,2 + rrs"], ceilings["best_first + tev (matched size)"]
    # a node the budget (6) cuts to its fixed child alone is a fixed node
    assert {row["depth"] for row in drawn} == {1, 2} and {row["design"] for row in drawn} <= {"mixed", "fixed"}
    assert [row["design"] for row in drawn if row["depth"] == 1] == ["mixed"]
    for row in drawn:  # rrs is exact, so it never beats the ceiling of the design; a mixed node with one sibling
        assert row["reached"] <= row["ceiling"] + 3 * (row["gap_se"] or 0) + 1e-9  # reaches it on average
    assert all(row["design"] == "fixed" and abs(row["gap"]) < 1e-9 for row in fixed)  # tev reaches sum p
    assert "the design's ceiling" in printed and "LP tail" in printed
