"""The workshop's services: the edited table's tree, laws and walks as the engine gives them, a bad table refused
in plain words before anything is drawn."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import make_generator
from tevcore.room.limits import ROOM
from tevcore.room.queue import ComputeQueue
from tevcore.studio.coupling import coupling
from tevcore.studio.turns import Seat
from tevcore.studio.workshop import explain_coupling, explain_orders, explain_tree, walk_tree
from tevcore.studio.workshop_tables import workshop_presets, workshop_tree
from tevcore.verify.laws import exit_law
from tevcore.verify.verifiers import get_verifier


def seat() -> Seat:
    return Seat(ROOM, ComputeQueue(1), "me")


def test_a_tables_lesson_and_walks_are_the_engines():
    table = workshop_presets()["bushy"]
    lesson = explain_tree(seat(), table)
    tree = workshop_tree(table)
    assert torch.allclose(lesson.flow.exit_mass, target_flow(tree.tree, tree.node_logits, 1.0).exit_mass)
    law = exit_law(tree.tree, tree.node_logits, 1.0)
    assert all(torch.allclose(lesson.bonus[v], law.bonus_probs(v)) for v in range(tree.tree.num_nodes))
    walks = walk_tree(seat(), lesson, 11)
    tev = get_verifier("tev")(tree.tree, tree.node_logits, 1.0, make_generator(11))
    assert walks.seed == 11 and list(walks.tev.path) == list(tev.path)
    with pytest.raises(ValueError, match="the seed must lie in"):
        walk_tree(seat(), lesson, -3)


def test_bad_tables_are_refused_in_plain_words():
    chain = workshop_presets()["chain"].copy()
    chain.loc[1, "p"] = 1.7
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\], got 1.7"):
        explain_tree(seat(), chain)
    with pytest.raises(ValueError, match="q must lie in"):
        explain_coupling(seat(), pd.DataFrame({"token": ["a"], "p": [0.5], "q": [1.5]}))
    only_one = coupling(pd.DataFrame({"token": ["a"], "p": [0.5], "q": [1.0]}))
    with pytest.raises(ValueError, match="no sibling to draw"):
        explain_orders(seat(), only_one, 0)
