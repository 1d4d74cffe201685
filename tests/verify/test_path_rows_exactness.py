"""Drawn trees whose siblings' subtrees come from rows given each sibling's path (`@sib1`): still exact.

rrs divides each try by the row the record says the node drew from, so
which pass drafted that row changes the acceptance, never the law. The
enumeration of every tree and every verdict (test_siblings_first's
machinery) shows the target's law within 1e-12 on synthetic rows that
depend on the whole path, with and without replacement, at several
temperatures and budgets that cut the tree.
"""

from __future__ import annotations

import pytest
import torch

from test_exactness import _distance, _seeded_logits, target_tokens_law
from test_sampled_exactness import START, VOCAB, _rows
from test_siblings_first import shipped_tokens_law
from tevcore.engine.draft_rows import DraftRows

pytestmark = pytest.mark.usefixtures("one_thread_module")


def path_rows(context: tuple[int, ...]) -> DraftRows:
    """The synthetic drafter's rows, and below any path of up to two tokens rows seeded by that path."""
    plain = _rows(context)

    def below_path(paths: list[tuple[int, ...]]) -> list[torch.Tensor]:
        return [torch.stack([torch.log_softmax(_seeded_logits("below", context + path, depth, vocab=VOCAB), -1)
                             for depth in range(len(path) + 1, plain.depth + 1)]) for path in paths]

    return DraftRows(plain.shared, below_path=below_path, known_depth=2)


@pytest.mark.parametrize("builder,budget,temperature", [("mixed@sib1:3,2,1", None, 1.0), ("mixed-wor@sib1:3,2", 4, 0.7),
                                                        ("sampled@sib1:2,2", None, 1.3), ("policy@sib1:3,2", 5, 0.8),
                                                        ("mixed@sib1:2,2", None, 0.0)])
def test_the_law_stays_the_target_when_siblings_draw_from_their_own_rows(builder, budget, temperature):
    worst, _ = _distance(shipped_tokens_law(builder, temperature, 2, budget, rows_of=path_rows),
                         target_tokens_law(temperature, VOCAB, START, 2))
    print(f"rrs on {builder}, budget {budget}, T={temperature}: max abs diff {worst:.2g}")
    assert worst <= 1e-12
