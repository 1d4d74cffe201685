"""Tree forward and KV commit against sequential recomputation.

Both sides run sdpa's math kernel: the default CPU kernel for a plain causal
forward sums in another order, which alone moves fp32 logits of size ~30 by
~1e-4. The claim under test is the mask, positions and cache compaction.
"""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from tevcore.engine.builders import best_first
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree

TARGETS = ["tiny_target", "default_target"]


@pytest.fixture(autouse=True)
def math_attention():
    with sdpa_kernel(SDPBackend.MATH):
        yield


def _sequential_logits(target, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return target.model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def _random_tree(vocab: int, budget: int, seed: int, root: int) -> DraftTree:
    generator = torch.Generator().manual_seed(seed)
    logq = torch.log_softmax(3 * torch.randn(4, vocab, generator=generator), -1)
    return best_first(root, logq, budget)


@pytest.mark.parametrize("fixture", TARGETS)
def test_tree_forward_equals_sequential_recompute(fixture, request):
    target = request.getfixturevalue(fixture)
    vocab = target.vocab_size
    context = torch.randint(0, vocab, (23,), generator=torch.Generator().manual_seed(1)).tolist()
    session = TargetSession(target)
    session.prefill(context)
    tree = _random_tree(vocab, 24, seed=2, root=context[-1])
    assert tree.max_depth >= 2
    logits = session.score_tree(tree).logits
    worst = 0.0
    for node in range(tree.num_nodes):
        ids = context + tree.tokens[tree.path(node)[1:]].tolist()
        worst = max(worst, float((logits[node] - _sequential_logits(target, ids)).abs().max()))
    scale = float(logits.abs().max())
    print(f"{target.name}: tree forward vs sequential max abs diff {worst:.3g} (largest logit {scale:.3g})")
    assert worst < 1e-5 * scale  # float32 rounding of different kernels; a masking error is O(1)


@pytest.mark.parametrize("fixture", TARGETS)
def test_commit_then_forward_equals_fresh_prefill(fixture, request):
    target = request.getfixturevalue(fixture)
    vocab = target.vocab_size
    context = torch.randint(0, vocab, (17,), generator=torch.Generator().manual_seed(3)).tolist()
    session = TargetSession(target)
    session.prefill(context)
    worst = 0.0
    for round_index in range(3):
        tree = _random_tree(vocab, 16, seed=10 + round_index, root=session.root_token)
        session.score_tree(tree)
        deepest = int(tree.depths.argmax())
        session.commit(tree.path(deepest), bonus_token=(7 * round_index + 5) % vocab)
        root_logits = session.score_tree(DraftTree.root_only(session.root_token)).logits[0]
        worst = max(worst, float((root_logits - _sequential_logits(target, session.committed)).abs().max()))
        session.rollback()
    print(f"{target.name}: after commit vs fresh prefill max abs diff {worst:.3g}")
    assert worst < 1e-4
    assert session.cached_length == len(session.committed) - 1


def test_prompt_longer_than_context_is_refused(tiny_target):
    session = TargetSession(tiny_target)
    with pytest.raises(ValueError, match="context"):
        session.prefill([1] * 300)


def test_tree_with_wrong_root_is_refused(tiny_target):
    session = TargetSession(tiny_target)
    session.prefill([1, 2, 3])
    with pytest.raises(ValueError, match="root"):
        session.score_tree(DraftTree.root_only(4))


def test_commit_rejects_a_non_path(tiny_target):
    session = TargetSession(tiny_target)
    session.prefill([1, 2, 3])
    tree = DraftTree(tokens=torch.tensor([3, 5, 6]), parents=torch.tensor([-1, 0, 0]), draft_logp=torch.zeros(3))
    session.score_tree(tree)
    with pytest.raises(ValueError, match="root path"):
        session.commit([0, 1, 2], bonus_token=1)


def test_committed_hidden_states_equal_a_fresh_forward(tiny_target):
    """Hidden states are written into preallocated rows; a decode past its reserve grows them."""
    vocab = tiny_target.vocab_size
    context = torch.randint(0, vocab, (9,), generator=torch.Generator().manual_seed(4)).tolist()
    session = TargetSession(tiny_target, hidden_layers=(1, 2))
    session.prefill(context, reserve=2)
    for round_index in range(4):
        tree = _random_tree(vocab, 12, seed=20 + round_index, root=session.root_token)
        session.score_tree(tree)
        node = int(tree.depths.argmax()) if round_index % 2 else tree.num_nodes - 1  # in place, then moved
        session.commit(tree.path(node), bonus_token=(3 * round_index + 1) % vocab)
    with torch.inference_mode():
        fresh = tiny_target.model(input_ids=torch.tensor([session.committed[:-1]]), output_hidden_states=True)
    for layer in (1, 2):
        kept = session.context_hidden[layer]
        assert kept.shape[0] == session.cached_length
        torch.testing.assert_close(kept, fresh.hidden_states[layer][0], rtol=1e-4, atol=1e-4)


def test_rewind_forgets_a_lookahead_and_the_next_forward_sees_the_old_context(tiny_target):
    """The greedy-rollout stand-in walks ahead and rewinds: afterwards the session is the one before."""
    vocab = tiny_target.vocab_size
    context = torch.randint(0, vocab, (9,), generator=torch.Generator().manual_seed(6)).tolist()
    session = TargetSession(tiny_target, hidden_layers=(1,))
    session.prefill(context, reserve=8)
    before = session.score_tree(DraftTree.root_only(session.root_token)).logits[0].clone()
    for token in (3, 4, 5):
        session.commit([0], token)
        session.score_tree(DraftTree.root_only(session.root_token))
    session.rewind(len(context))
    assert session.committed == context and session.context_hidden[1].shape[0] == len(context) - 1
    again = session.score_tree(DraftTree.root_only(session.root_token)).logits[0]
    torch.testing.assert_close(again, before, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="rewind"):
        session.rewind(0)
