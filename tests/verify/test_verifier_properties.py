"""Properties of every verifier over random trees and logits (hypothesis), through the public entry point.

Valid input: the verdict is a root-to-exit chain of the tree and the bonus is a
vocabulary token that is not a child of the exit (for `chain`, not the child on
its own chain: it verifies that chain alone). Invalid input: a ValueError, never
another exception and never a verdict.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tevcore.engine.tree import DraftTree
from tevcore.verify.verifiers import VERIFIERS, chain_subtree, get_verifier

SETTINGS = settings(max_examples=60, deadline=None)
TEMPERATURES = st.sampled_from([0.0, 0.3, 1.0, 2.5])


@st.composite
def trees(draw, max_nodes: int = 10) -> tuple[DraftTree, int]:
    """A random valid tree over a small vocabulary, and that vocabulary's size."""
    vocab = draw(st.integers(2, 12))
    tokens, parents, logp = [draw(st.integers(0, vocab - 1))], [-1], [0.0]
    used: list[set[int]] = [set()]
    for _ in range(draw(st.integers(0, max_nodes - 1))):
        parent = draw(st.integers(0, len(tokens) - 1))
        free = sorted(set(range(vocab)) - used[parent])
        if not free:
            continue
        token = draw(st.sampled_from(free))
        used[parent].add(token)
        used.append(set())
        tokens.append(token)
        parents.append(parent)
        logp.append(draw(st.floats(-12.0, 0.0)))
    return DraftTree(tokens=tokens, parents=parents, draft_logp=logp), vocab


@st.composite
def logits_for(draw, tree: DraftTree, vocab: int) -> torch.Tensor:
    """Random logits: a few scales, and sometimes -inf entries (zero probabilities), never a row without a law."""
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 4.0, 20.0]))
    logits = scale * torch.randn(tree.num_nodes, vocab, generator=generator, dtype=torch.float64)
    if draw(st.booleans()):
        zeros = torch.rand(tree.num_nodes, vocab, generator=generator) < 0.3
        zeros[torch.arange(tree.num_nodes), logits.argmax(-1)] = False  # keep each row's favourite finite
        logits = logits.masked_fill(zeros, -math.inf)
    return logits.to(draw(st.sampled_from([torch.float32, torch.float64])))


@st.composite
def scored_trees(draw):
    tree, vocab = draw(trees())
    return tree, draw(logits_for(tree, vocab)), draw(TEMPERATURES), draw(st.integers(0, 2**31 - 1))


def _child_tokens(tree: DraftTree, node: int) -> set[int]:
    return set(tree.tokens[1:][tree.parents[1:] == node].tolist())


@pytest.mark.parametrize("name", sorted(VERIFIERS))
@SETTINGS
@given(case=scored_trees())
def test_a_verdict_is_a_root_to_exit_chain_and_the_bonus_a_non_child_token(name, case):
    tree, logits, temperature, seed = case
    verdict = get_verifier(name)(tree, logits, temperature, torch.Generator().manual_seed(seed))
    path = list(verdict.path)
    assert path[0] == 0 and verdict.exit_node == path[-1] and verdict.emitted == len(path)
    assert all(0 < child < tree.num_nodes and int(tree.parents[child]) == parent
               for parent, child in zip(path, path[1:]))
    assert 0 <= verdict.bonus_token < logits.shape[-1]
    if name == "chain":  # it verifies the top-1 chain alone: the path stays on it, the bonus is not its next token
        chain, ids = chain_subtree(tree)
        assert path == ids[: len(path)].tolist()
        banned = {int(tree.tokens[ids[len(path)]])} if len(path) < len(ids) else set()
    else:
        banned = _child_tokens(tree, verdict.exit_node)
    if name == "naive_ratio" and len(banned) == logits.shape[-1]:
        return  # the inexact foil may exit where the children cover the vocabulary: no legal bonus is left
    assert verdict.bonus_token not in banned
    assert math.isfinite(float(logits[verdict.exit_node, verdict.bonus_token]))  # a token of probability > 0


def _spoil_logits(draw, tree: DraftTree, vocab: int):
    logits = torch.randn(tree.num_nodes, vocab)
    how = draw(st.sampled_from(["nan", "+inf", "row -inf", "rows", "columns", "1-D", "3-D", "int"]))
    node = draw(st.integers(0, tree.num_nodes - 1))
    if how == "nan":
        logits[node, draw(st.integers(0, vocab - 1))] = math.nan
    elif how == "+inf":
        logits[node, draw(st.integers(0, vocab - 1))] = math.inf
    elif how == "row -inf":
        logits[node] = -math.inf
    elif how == "rows":
        logits = torch.randn(tree.num_nodes + draw(st.sampled_from([-1, 1, 3])), vocab)
    elif how == "columns":
        logits = torch.randn(tree.num_nodes, int(tree.tokens.max()))  # the tree's largest token is outside
    elif how == "1-D":
        logits = logits[0]
    elif how == "3-D":
        logits = logits[None]
    else:
        logits = logits.long()
    return logits


@st.composite
def bad_inputs(draw):
    tree, vocab = draw(trees())
    if draw(st.booleans()):
        return tree, _spoil_logits(draw, tree, vocab), draw(TEMPERATURES)
    temperature = draw(st.sampled_from([-1.0, -1e-9, math.nan, math.inf, -math.inf, "warm", None]))
    return tree, torch.randn(tree.num_nodes, vocab), temperature


@pytest.mark.parametrize("name", sorted(VERIFIERS))
@SETTINGS
@given(case=bad_inputs(), seed=st.integers(0, 2**31 - 1))
def test_invalid_input_is_a_clear_value_error_and_nothing_else(name, case, seed):
    tree, logits, temperature = case
    with pytest.raises(ValueError, match="logits|vocabulary|temperature|floating"):
        get_verifier(name)(tree, logits, temperature, torch.Generator().manual_seed(seed))
