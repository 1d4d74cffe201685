"""Fixed and sampled trees side by side in one bench run, and the sibling diagnostics (tiny target)."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder_list
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord
from tevcore.engine.tree import DraftTree
from tevcore.lab.bench import run_bench
from tevcore.verify.registry import valid_pairs
from tevcore.lab.bench_table import format_table
from tevcore.lab.siblings import format_sibling_table, sibling_diagnostics
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.target.loading import load_target


def test_valid_pairs_keep_each_rule_on_trees_the_registry_pairs_it_with():
    """The registry's one answer: the foil runs on every tree, sampled ones included (as `round` runs it)."""
    builders = parse_builder_list("best_first,sampled:2,1,sampled:1,1,1")
    pairs = [(b.name, v) for b, v in valid_pairs(builders, ["tev", "rrs", "block", "naive_ratio"])]
    assert pairs == [("best_first", "tev"), ("best_first", "naive_ratio"), ("sampled:2,1", "tev"),
                     ("sampled:2,1", "rrs"), ("sampled:2,1", "naive_ratio"), ("sampled:1,1,1", "tev"),
                     ("sampled:1,1,1", "rrs"), ("sampled:1,1,1", "block"), ("sampled:1,1,1", "naive_ratio")]
    with pytest.raises(ValueError, match="no verifier of rrs runs on the trees of chain"):
        valid_pairs(parse_builder_list("chain"), ["rrs"])


def test_bench_lists_the_pairs_it_skips_and_why_before_any_model_work(tmp_path, capsys):
    """Issue 51: the pairs the registry leaves out were dropped silently; a table lacked the column asked for."""
    from tevcore.cli import main

    code = main(["bench", "--builders", "best_first,sampled:2,1", "--verifiers", "tev,rrs,block", "--target",
                 "some-org/some-model", "--out", str(tmp_path / "b.json")])  # an offline target ends the run there
    err = capsys.readouterr().err.splitlines()
    skipped = [line for line in err if line.startswith("skipped: ")]
    assert code == 2 and [line.split(":", 2)[1].strip() for line in skipped] == [
        "best_first + rrs", "best_first + block", "sampled"]  # "sampled:2,1 + block" splits at its own colon
    assert "verifier rrs divides by the q each child was drawn from; the trees of builder 'best_first' are not " \
           "drawn" in skipped[0]
    assert skipped[2].startswith("skipped: sampled:2,1 + block: verifier block verifies a chain drawn one draw per "
                                 "node; the trees of builder 'sampled:2,1' are not a chain")


def _record(tree: DraftTree, path: list[int]) -> RoundRecord:
    logits = torch.zeros(tree.num_nodes, 9)
    return RoundRecord(index=0, proposer="t", builder="t", budget=tree.size, temperature=1.0, context_length=1,
                       tree=tree, flow=target_flow(tree, logits, 1.0, missing_k=0), token_texts=[], missing_texts=[],
                       verifier="tev", path=path, exit_node=path[-1], bonus_token=8, emitted_tokens=[])


def test_sibling_diagnostics_count_ranks_and_what_follows_a_pick():
    # root -> 1 (top-1), 2 (rank 1); 1 -> 3; 2 -> 4 (top-1), 5 (rank 1)
    tree = DraftTree(tokens=[0, 1, 2, 3, 4, 5], parents=[-1, 0, 0, 1, 2, 2],
                     draft_logp=[0.0, -0.1, -2.0, -0.3, -0.2, -1.0])
    records = [_record(tree, [0, 2, 5]), _record(tree, [0, 1]), _record(tree, [0, 2])]
    found = sibling_diagnostics(records)
    by_rank = {(r["depth"], r["rank"]): (r["accepted"], r["nodes"]) for r in found["by_rank"]}
    assert by_rank == {(1, 0): (1, 3), (1, 1): (2, 3), (2, 0): (0, 6), (2, 1): (1, 3)}
    after = {(r["depth"], r["pick"]): (r["next_accepted"], r["rounds"]) for r in found["after_pick"]}
    assert after == {(1, "top-1"): (0, 1), (1, "other"): (1, 2)}
    table = format_sibling_table("x", found)
    assert "0.667 (3)" in table and "0.500 (2)" in table


@pytest.fixture(scope="module")
def bench_rows(tiny_model_folder):
    target = load_target(str(tiny_model_folder("llama", chat_template=True)), device="cpu")
    torch.manual_seed(0)
    return run_bench(target, GreedyRolloutProposer(depth=3), ["gsm8k"], n=1, max_new_tokens=8, temperatures=[1.0],
                     budgets=[4], verifiers=["tev", "rrs", "block"], peers=False,
                     builders=parse_builder_list("best_first,sampled:2,1,sampled:1,1,1"))


@pytest.mark.slow  # six decodes and AR on a tiny model: ~10 s of CPU
def test_bench_runs_every_valid_pair_at_one_budget(bench_rows):
    spec = [(r["builder"], r["verifier"]) for r in bench_rows if r["method"] == "ours speculative"]
    assert spec == [("best_first", "tev"), ("sampled:2,1", "tev"), ("sampled:2,1", "rrs"), ("sampled:1,1,1", "tev"),
                    ("sampled:1,1,1", "rrs"), ("sampled:1,1,1", "block")]
    for row in bench_rows[1:]:
        assert row["budget"] == 4 and row["mean_tree_size"] <= 4 and row["speedup"] > 0
        assert row["siblings"]["by_rank"] and row["mean_expected_length"] >= 1.0
        assert row["length_gap_se"] is not None
    assert "sampled:1,1,1" in format_table(bench_rows)


@pytest.mark.parametrize("command", [
    ["bench", "--builders", "best_first,sampled:2,1", "--verifiers", "tev", "--trim", "off,auto", "--no-peers"],
    ["round", "--prompt", "hi", "--builder", "sampled:2,1", "--trim", "auto"],
    ["generate", "--prompt", "hi", "--builder", "sampled:1,1", "--verifier", "block", "--trim", "1.5"],
])
def test_bench_and_round_refuse_a_trimmed_sampled_tree_in_one_line_before_any_model_loads(command, capsys,
                                                                                          tmp_path):
    from tevcore.cli import main

    missing = tmp_path / "no-model"  # a load would fail naming it: the refusal must come first
    assert main([*command, "--target", str(missing), "--out", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cuts a tree to a prefix, which a sampled tree's draws do not survive" in err[0]
    assert str(missing) not in err[0]


def test_bench_sets_each_node_against_its_designs_ceiling(tiny_model_folder):
    """With ceilings on, each exact rule's row holds the per-depth table: tev on the fixed tree reaches its ceiling
    (sum of p over the children), rrs on mixed trees stays at or below theirs; the foil gets none."""
    target = load_target(str(tiny_model_folder("llama", chat_template=True)), device="cpu")
    torch.manual_seed(0)
    rows = run_bench(target, GreedyRolloutProposer(depth=3), ["gsm8k"], n=1, max_new_tokens=8, temperatures=[1.0],
                     budgets=[4], verifiers=["tev", "rrs", "naive_ratio"], peers=False,
                     builders=parse_builder_list("best_first,mixed:2,1"), ceilings=True)
    found = {(r["builder"], r["verifier"]): r["ceilings"] for r in rows if r["method"] == "ours speculative"}
    assert found[("best_first", "tev")] and all(abs(row["gap"]) < 1e-9 for row in found[("best_first", "tev")])
    mixed = found[("mixed:2,1", "rrs")]
    # the root: one fixed child and one drawn sibling; a depth-1 node: its fixed child alone, whose ceiling p(a) a
    # point-mass try reaches on every tree
    assert [(row["depth"], row["design"]) for row in mixed] == [(1, "mixed"), (2, "fixed")]
    assert mixed[0]["reached"] <= mixed[0]["ceiling"] + 3 * (mixed[0]["gap_se"] or 0) + 1e-9
    assert abs(mixed[1]["gap"]) < 1e-9
    assert found[("best_first", "naive_ratio")] is None and found[("mixed:2,1", "naive_ratio")] is None
