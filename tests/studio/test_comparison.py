"""The verifier comparison's services: a request checked once before it waits, every answer the page draws carried
by the result (p-values against each rule's own law, the bonus law at an exit), and result files read under the
server's byte cap."""

from __future__ import annotations

import json

import pytest
import torch

from tevcore.engine.builders import best_first
from tevcore.results import ResultRecord, RunMeta
from tevcore.room.limits import ROOM
from tevcore.room.queue import ComputeQueue
from tevcore.studio.comparison import (DrawRequest, bonus_at_exit, compare_verifiers, read_result_files,
                                       study_tree)
from tevcore.studio.turns import Seat
from tevcore.verify.laws import exit_law


def seat(limits=ROOM) -> Seat:
    return Seat(limits, ComputeQueue(1), "me")


def tree_and_rows():
    generator = torch.Generator().manual_seed(3)
    draft = torch.log_softmax(2.0 * torch.randn(4, 9, generator=generator), -1)
    tree = best_first(0, draft, 8)
    return tree, 2.0 * torch.randn(tree.num_nodes, 9, generator=generator)


@pytest.mark.parametrize("request_, message", [
    (DrawRequest(("tev",), 1.0, 200_001, 0), "draws per verifier 200001 is over this server's cap"),
    (DrawRequest(("tev", "no-such-rule"), 1.0, 1000, 0), "no such verifier: no-such-rule"),
    (DrawRequest(("tev",), 1.0, 1000, -1), r"the seed must lie in \[0, "),
    (DrawRequest(("tev",), 7.5, 1000, 0), r"the temperature must lie in \[0, 5\], got 7.5"),
])
def test_a_draw_request_is_refused_in_one_line_before_any_work(request_, message):
    tree, logits = tree_and_rows()
    with pytest.raises(ValueError, match=message):
        compare_verifiers(seat(), request_, tree, logits)


def test_the_comparison_carries_each_rules_law_p_values_and_the_bonus_at_an_exit():
    tree, logits = tree_and_rows()
    found = compare_verifiers(seat(), DrawRequest(("tev", "chain", "naive_ratio"), 1.0, 4000, 0), tree, logits)
    law = exit_law(tree, logits, 1.0)
    assert torch.allclose(found.law.exit_mass, law.exit_mass)
    assert torch.allclose(study_tree(seat(), tree, logits, 1.0).exit_mass, law.exit_mass)
    assert set(found.results) == set(found.own_laws) == set(found.exit_p) == {"tev", "chain", "naive_ratio"}
    assert found.exit_p["tev"] > 1e-4 and found.exit_p["chain"] > 1e-4  # exact: each follows its own law
    assert torch.allclose(found.own_laws["tev"].exit_probs, law.exit_probs)
    assert not torch.allclose(found.own_laws["chain"].exit_probs, law.exit_probs)  # the chain's own law
    node = int(law.exit_mass.argmax())
    there = bonus_at_exit(found, node)
    assert there.law == pytest.approx(law.bonus_probs(node).numpy())
    assert there.exits["tev"] == int(found.results["tev"].exit_counts[node])
    assert sum(there.shares["tev"]) == pytest.approx(1.0) and 0.0 <= there.pvalues["tev"] <= 1.0


def test_result_files_are_read_under_the_byte_cap_and_a_bad_one_is_named(tmp_path):
    record = ResultRecord("bench", RunMeta.now("python -m tevcore bench", "cpu", 0), [{"verifier": "tev"}])
    (tmp_path / "good.json").write_text(json.dumps(record.to_dict()))
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "big.json").write_text(json.dumps(record.to_dict()) + " " * 2048)
    limits = ROOM.with_caps(upload_bytes=len((tmp_path / "good.json").read_bytes()) + 100)
    found = read_result_files(seat(limits), [], tmp_path)
    assert list(found.records) == ["good.json"] and found.records["good.json"].command == "bench"
    assert set(found.refused_files) == {str(tmp_path / "bad.json"), str(tmp_path / "big.json")}
    assert "upload cap" in found.refused_files[str(tmp_path / "big.json")]
    assert read_result_files(seat(), [], tmp_path / "absent").records == {}
