"""Pooled contexts score a tree at any anchor as a fresh session would, in any order of anchors."""

import torch

from tevcore.engine.builders import best_first
from tevcore.target.session import TargetSession
from tevcore.train.treescore import PooledContexts


def test_pooled_scores_equal_fresh_sessions_in_any_order(tiny_target):
    vocab = tiny_target.vocab_size
    ids = torch.randint(0, vocab, (30,), generator=torch.Generator().manual_seed(5)).tolist()
    pool = PooledContexts(tiny_target, {(0, 0): ids})
    logq = torch.log_softmax(torch.randn(3, vocab, generator=torch.Generator().manual_seed(6)), -1)
    for position in (20, 8, 25, 8, 12):  # a later anchor's tree lies over an earlier anchor's context
        tree = best_first(ids[position], logq, 6)
        fresh = TargetSession(tiny_target)
        fresh.prefill(ids[:position + 1])
        torch.testing.assert_close(pool.score((0, 0), position, tree), fresh.score_tree(tree).logits,
                                   rtol=1e-4, atol=1e-4)


def test_a_scored_tree_leaves_only_the_kept_cache_behind(tiny_target):
    ids = torch.randint(0, tiny_target.vocab_size, (30,), generator=torch.Generator().manual_seed(7)).tolist()
    pool = PooledContexts(tiny_target, {(0, 0): ids})
    logq = torch.log_softmax(torch.randn(3, tiny_target.vocab_size, generator=torch.Generator().manual_seed(8)), -1)
    pool.score((0, 0), 15, best_first(ids[15], logq, 6))
    for layer, (keys, values) in zip(pool.sessions[(0, 0)].cache.layers, pool.snapshots[(0, 0)]):
        assert layer.keys is keys and layer.values is values  # no second copy of the context per sequence


def test_a_batch_of_trees_scores_as_each_tree_alone(tiny_target):
    vocab = tiny_target.vocab_size
    generator = torch.Generator().manual_seed(9)
    sequences = {(0, k): torch.randint(0, vocab, (length,), generator=generator).tolist()
                 for k, length in enumerate((30, 18, 41))}
    pool = PooledContexts(tiny_target, sequences)
    logq = torch.log_softmax(torch.randn(3, vocab, generator=generator), -1)
    items = [((0, k), position, best_first(sequences[(0, k)][position], logq, budget))
             for k, position, budget in ((0, 20, 6), (1, 5, 3), (2, 37, 9), (0, 8, 6))]  # unequal contexts and trees
    batched = pool.score_many(items)
    for item, logits in zip(items, batched):
        torch.testing.assert_close(logits, pool.score(*item), rtol=1e-4, atol=1e-4)
