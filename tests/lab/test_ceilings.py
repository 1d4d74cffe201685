"""Each design's ceiling per node: the coupling LP, its closed forms, and the rules that reach or stay below it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verify"))
from test_sampled_exactness import enumerate_trees  # noqa: E402
from tevcore.engine.draft_rows import DraftRows  # noqa: E402
from tevcore.engine.sampling import probs  # noqa: E402
from tevcore.lab.ceilings import (_drawn_sets, coupling_acceptance, gap_by_depth, node_ceilings,  # noqa: E402
                                  optimal_acceptance)
from tevcore.verify.laws import node_acceptance, rrs_fixed_first_law  # noqa: E402


def _pair(seed: int, vocab: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    generator = np.random.default_rng(seed)
    return (torch.tensor(generator.normal(0, 1.5, vocab)),
            torch.log_softmax(torch.tensor(generator.normal(0, 1.5, vocab)), -1).float())


def test_one_draw_lp_equals_the_closed_form():
    for seed in range(10):
        p_logits, q_logp = _pair(seed)
        p, q = probs(p_logits, 1.0), probs(q_logp.double(), 1.0)
        lp = coupling_acceptance(p.numpy(), _drawn_sets(q.numpy(), 1, True))
        assert lp == pytest.approx(float(torch.minimum(p, q).sum()), abs=1e-9)
        assert optimal_acceptance(p, q, 1, "iid")[0] == pytest.approx(lp, abs=1e-9)


def test_drafts_from_the_target_itself_reach_one():
    p = probs(_pair(3)[0], 1.0)
    for k in (2, 3):
        assert optimal_acceptance(p, p, k, "iid")[0] == pytest.approx(1.0, abs=1e-9)


def _mean_root(builder: str, p_logits, q_logp, temperature: float, verifier: str) -> tuple[float, float]:
    """(ceiling at the root, the rule's acceptance there averaged over every tree the builder draws)."""
    rows = DraftRows(q_logp[None, :])
    reached, ceilings = 0.0, set()
    for weight, tree in enumerate_trees(builder, (0,), None, temperature, rows):
        logits = p_logits.expand(tree.num_nodes, -1)
        root = [c for c in node_ceilings(tree, logits, temperature, verifier) if c.depth == 0][0]
        assert root.tail == 0.0  # the vocabulary fits the LP's support: exact
        reached += weight * root.reached
        ceilings.add(round(root.ceiling, 9))
    assert len(ceilings) == 1  # the ceiling depends on p and q, not on the draws
    return ceilings.pop(), reached


@pytest.mark.parametrize("builder", ["sampled:2", "sampled-wor:2", "sampled:3", "sampled-wor:3", "mixed:3",
                                     "mixed-wor:3", "mixed-wor:4"])
def test_rrs_stays_at_or_below_the_ceiling(builder):
    gaps = []
    for seed in range(12):
        p_logits, q_logp = _pair(100 + seed)
        ceiling, reached = _mean_root(builder, p_logits, q_logp, 1.0, "rrs")
        assert reached <= ceiling + 1e-9
        gaps.append(ceiling - reached)
    print(f"{builder}: ceiling - rrs, mean {np.mean(gaps):.4f}, max {np.max(gaps):.4f}")


def test_a_mixed_node_with_one_drawn_sibling_is_at_its_ceiling_under_siblings_first_only():
    old_gaps = []
    for seed in range(12):
        p_logits, q_logp = _pair(200 + seed)
        ceiling, reached = _mean_root("mixed:2", p_logits, q_logp, 1.0, "rrs")
        assert reached == pytest.approx(ceiling, abs=1e-9)
        rows = DraftRows(q_logp[None, :])
        old = sum(w * float(node_acceptance(rrs_fixed_first_law(t, p_logits.expand(t.num_nodes, -1), 1.0))[0])
                  for w, t in enumerate_trees("mixed:2", (0,), None, 1.0, rows))
        old_gaps.append(ceiling - old)
    assert min(old_gaps) >= -1e-9 and max(old_gaps) > 1e-2  # the fixed-child-first order falls short


def test_fixed_children_ceiling_is_what_tev_reaches_and_the_table_groups_by_depth():
    from tevcore.engine.builder_specs import parse_builder
    from test_sampled_exactness import _node_logits, _rows, START

    tree = parse_builder("best_first")(START[-1], _rows(START), 6, 1.0, None)
    found = node_ceilings(tree, _node_logits(tree, START), 1.0, "tev")
    assert found and all(f.design == "fixed" and f.ceiling == pytest.approx(f.reached, abs=1e-12) for f in found)
    table = gap_by_depth(found)
    assert {row["depth"] for row in table} == {f.depth + 1 for f in found}
    assert all(abs(row["gap"]) < 1e-12 for row in table)
