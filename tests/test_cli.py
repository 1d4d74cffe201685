"""The `round` command on the embedded default: table on stdout, a trace anyone can recompute."""

from __future__ import annotations

import pytest
import torch

from tevcore.cli import main
from tevcore.engine.flow import path_log_probs
from tevcore.engine.records import read_trace


def test_round_prints_the_tree_and_writes_a_recomputable_record(tmp_path, capsys):
    out = tmp_path / "round.jsonl"
    code = main(["round", "--prompt", "Name three colours.", "--proposer", "rollout", "--budget", "6",
                 "--temperature", "1.0", "--seed", "0", "--device", "cpu", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "stand-in" in printed and "1 + C" in printed and "top missing tokens" in printed
    trace = read_trace(out)
    record = trace.rounds[0]
    assert record.proposer.startswith("stand-in") and record.tree.size == 6
    assert len(record.token_texts) == record.tree.num_nodes == len(record.missing_texts)
    # the flow can be recomputed from the stored per-node edge probabilities and parents
    log_p = path_log_probs(record.tree, record.flow.edge_prob.log())
    assert torch.allclose(log_p.exp(), record.flow.path_prob, atol=1e-9)
    assert abs(float(record.flow.exit_mass.sum()) - 1.0) < 1e-6
    assert record.path[0] == 0 and record.exit_node == record.path[-1]


def test_bad_input_is_a_message_not_a_traceback(capsys):
    code = main(["round", "--prompt", "hi", "--budget", "-3", "--proposer", "rollout"])
    assert code == 2
    assert "budget" in capsys.readouterr().err


@pytest.mark.parametrize("value, message", [("often", "'off', 'auto' or a number"), ("-1", "finite number > 0")])
def test_a_bad_trim_is_refused_before_loading(capsys, value, message):
    assert main(["generate", "--prompt", "hi", "--trim", value]) == 2
    assert message in capsys.readouterr().err
