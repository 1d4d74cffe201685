"""Which pass drafts each node of a drawn tree with `@sib1`: the drafter's own top-1 spine keeps the plain rows,
every node below a drawn sibling draws from a pass given its own path, asked once per depth."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.draft_rows import DraftRows
from tevcore.engine.sampling import make_generator, probs

VOCAB, DEPTH = 6, 3


def _row(seed: int) -> torch.Tensor:
    return torch.log_softmax(torch.randn(VOCAB, generator=torch.Generator().manual_seed(seed)) * 2, -1)


def _rows(known_depth: int = 2) -> tuple[DraftRows, list[list[tuple[int, ...]]]]:
    asked: list[list[tuple[int, ...]]] = []

    def below_path(paths):
        asked.append(list(paths))
        return [torch.stack([_row(1000 + 97 * hash(path) % 10007 + d) for d in range(len(path) + 1, DEPTH + 1)])
                for path in paths]

    shared = torch.stack([_row(d) for d in range(DEPTH)])
    return DraftRows(shared, below_path=below_path, known_depth=known_depth), asked


def _drawn_from(tree, node: int) -> torch.Tensor:
    return tree.draws.proposal(node)


@pytest.mark.parametrize("seed", range(5))
def test_the_spine_keeps_the_plain_rows_and_each_sibling_gets_its_own(seed):
    rows, asked = _rows()
    tree = parse_builder("mixed@sib1:3,2,1")(0, rows, None, 1.0, make_generator(seed))
    tokens, spine = tree.tokens.tolist(), rows.shared.argmax(-1).tolist()
    for node in range(tree.num_nodes):
        if not tree.children()[node]:
            continue
        path = tuple(tokens[v] for v in tree.path(node)[1:])
        depth = len(path) + 1
        on_spine = list(path) == spine[:len(path)]
        want = rows.shared[depth - 1] if on_spine else rows.below_path([path])[0][0]
        if not on_spine and len(path) == 2 and path[:1] != (spine[0],):
            below_sibling = rows.below_path([path[:1]])[0]
            if path[1] == int(below_sibling[0].argmax()):  # the sibling's own top-1 child: its pass's next row
                want = below_sibling[1]
        assert torch.allclose(_drawn_from(tree, node), probs(want.double(), 1.0))
    depths_asked = [len(paths[0]) for paths in asked[:2]]
    assert depths_asked == sorted(depths_asked) and all(len({len(p) for p in paths}) == 1 for paths in asked[:2])


def test_paths_longer_than_the_drafter_can_be_given_take_their_longest_given_prefix():
    rows, asked = _rows(known_depth=1)
    for seed in range(8):
        parse_builder("sampled@sib1:3,3,1")(0, rows, None, 1.5, make_generator(seed))
    assert asked and all(len(path) <= 1 for paths in asked for path in paths)


def test_a_shape_with_sib_refuses_rows_that_cannot_be_given_a_path():
    plain = DraftRows(torch.stack([_row(d) for d in range(DEPTH)]))
    with pytest.raises(ValueError, match="known slots"):
        parse_builder("mixed@sib1:2,1")(0, plain, None, 1.0, make_generator(0))


@pytest.mark.parametrize("name", ["mixed@sib2:2,1", "mixed@sib0:2,1"])
def test_sib_takes_only_one(name):
    with pytest.raises(ValueError, match="sib1"):
        parse_builder(name)
