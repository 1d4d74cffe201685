"""DraftTree: validation on construction, structure queries and the dict round trip."""

import math

import pytest
import torch

from tevcore.engine.tree import DraftTree, union


def make(tokens, parents, logp=None, budget=None):
    logp = [0.0] + [-0.5] * (len(tokens) - 1) if logp is None else logp
    return DraftTree(tokens=torch.tensor(tokens), parents=torch.tensor(parents),
                     draft_logp=torch.tensor(logp, dtype=torch.float32), budget=budget)


# root 7; node 1 (tok 3) and node 2 (tok 4) under the root; 3 under 1; 4 under 3; 5 under 2
TOKENS = [7, 3, 4, 3, 1, 0]
PARENTS = [-1, 0, 0, 1, 3, 2]


@pytest.fixture
def tree():
    return make(TOKENS, PARENTS, budget=6)


def test_structure(tree):
    assert tree.size == 5 and tree.num_nodes == 6 and tree.max_depth == 3
    assert tree.depths.tolist() == [0, 1, 1, 2, 3, 2]
    assert tree.children() == [[1, 2], [3], [5], [4], [], []]
    assert [level.tolist() for level in tree.levels()] == [[1, 2], [3, 5], [4]]
    assert tree.path(4) == [0, 1, 3, 4] and tree.path(0) == [0]


def test_child_token_mask(tree):
    mask = tree.child_token_mask(vocab_size=9)
    assert mask.shape == (6, 9) and mask.dtype == torch.bool
    expected = torch.zeros(6, 9, dtype=torch.bool)
    for node, kids in enumerate(tree.children()):
        for kid in kids:
            expected[node, TOKENS[kid]] = True
    assert torch.equal(mask, expected)
    assert int(mask.sum()) == tree.size


def test_ancestor_mask_matches_paths(tree):
    mask = tree.ancestor_mask()
    for i in range(tree.num_nodes):
        assert set(torch.nonzero(mask[i]).flatten().tolist()) == set(tree.path(i))


@pytest.mark.parametrize(
    "tokens, parents, logp, budget, message",
    [
        ([], [], [], None, "at least the root"),
        ([1, 2], [0, 0], None, None, "node 0 must be the root"),
        ([1, 2], [-1, -1], None, None, "parents must precede"),
        ([1, 2, 3], [-1, 2, 0], None, None, "parents must precede"),  # forward reference
        ([1, 2], [-1, 1], None, None, "parents must precede"),  # self-parent
        ([1, 2, 2], [-1, 0, 0], None, None, "siblings must carry distinct tokens"),
        ([1, 2, 3], [-1, 0, 0], None, 1, "more than its budget"),
        ([1, 2], [-1, 0], None, -1, "budget must be >= 0"),
        ([1, 2], [-1, 0], [0.0, math.nan], None, "not NaN"),
        ([1, 2], [-1, 0], [0.0, 0.1], None, "<= 0"),
        ([1, -2], [-1, 0], None, None, "non-negative"),
        ([1, 2], [-1, 0, 0], None, None, "one entry per node"),
        ([1, 2], [-1, 0], [0.0], None, "one entry per node"),
    ],
)
def test_invalid_trees_raise(tokens, parents, logp, budget, message):
    with pytest.raises(ValueError, match=message):
        make(tokens, parents, logp, budget)


def test_same_token_under_different_parents_is_fine():
    t = make([5, 2, 3, 2, 2], [-1, 0, 0, 1, 2])
    assert t.depths.tolist() == [0, 1, 1, 2, 2]


def test_budget_is_an_upper_bound():
    assert make([1, 2, 3], [-1, 0, 0], budget=2).size == 2
    assert make([1], [-1], [0.0], budget=0).size == 0


def test_dict_round_trip(tree):
    data = tree.to_dict()
    back = DraftTree.from_dict(data)
    assert back.to_dict() == data
    for name in ("tokens", "parents", "draft_logp", "depths"):
        assert torch.equal(getattr(back, name), getattr(tree, name))
    assert back.budget == 6


def test_from_dict_rejects_disagreeing_depths(tree):
    data = tree.to_dict()
    data["depths"] = [0, 1, 1, 2, 2, 2]
    with pytest.raises(ValueError, match="depths"):
        DraftTree.from_dict(data)


@pytest.mark.parametrize("drop", ["tokens", "parents", "draft_logp"])
def test_from_dict_missing_field(tree, drop):
    data = tree.to_dict()
    del data[drop]
    with pytest.raises(ValueError, match="not a draft tree record"):
        DraftTree.from_dict(data)


def test_from_dict_validates(tree):
    data = tree.to_dict()
    data["parents"][3] = 4
    with pytest.raises(ValueError, match="parents must precede"):
        DraftTree.from_dict(data)


def test_root_only():
    t = DraftTree.root_only(42)
    assert t.size == 0 and t.num_nodes == 1 and t.max_depth == 0
    assert t.tokens.tolist() == [42] and t.parents.tolist() == [-1] and t.draft_logp.tolist() == [0.0]
    assert t.children() == [[]] and t.levels() == [] and t.path(0) == [0]
    assert not t.child_token_mask(50).any()
    assert t.ancestor_mask().tolist() == [[True]]
    assert DraftTree.from_dict(t.to_dict()).tokens.tolist() == [42]


def test_first_keeps_a_prefix_of_nodes_as_a_tree():
    tree = DraftTree(tokens=torch.tensor([1, 2, 3, 4]), parents=torch.tensor([-1, 0, 1, 0]),
                     draft_logp=torch.tensor([0.0, -0.1, -0.2, -0.3]), budget=4)
    two = tree.first(2)
    assert two.tokens.tolist() == [1, 2, 3] and two.parents.tolist() == [-1, 0, 1] and two.budget == 4
    assert tree.first(0).size == 0 and tree.first(3).tokens.tolist() == tree.tokens.tolist()
    with pytest.raises(ValueError, match="cannot keep 4 nodes"):
        tree.first(4)


def test_a_union_holds_every_trees_paths_once_and_maps_each_node_to_its_path():
    first = make(TOKENS, PARENTS)  # paths 3, 4, 3-3, 3-3-1, 4-0 under root 7
    second = make([7, 4, 3, 5, 3], [-1, 0, 1, 0, 2])  # 4, 4-3, 5, 5-3: shares only the path 4 with the first
    merged, where = union([first, second, first])
    assert merged.num_nodes == 6 + 3  # 4-3, 5, 5-3 are new
    for tree, nodes in zip([first, second, first], where):
        assert nodes[0] == 0
        for node in range(tree.num_nodes):  # the same token path, root to node
            assert merged.tokens[merged.path(int(nodes[node]))].tolist() == tree.tokens[tree.path(node)].tolist()
    assert where[0].tolist() == where[2].tolist() == list(range(6)) and where[1].tolist()[1] == 2
    with pytest.raises(ValueError, match="same root"):
        union([first, make([8, 1], [-1, 0])])
