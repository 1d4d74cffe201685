"""Anchor batches: the next tokens they carry, and the inputs of training with a known path's leading tokens."""

from __future__ import annotations

import torch

from tevcore.train.anchors import AnchorSet
from tevcore.proposers.block_training import known_inputs as _known_inputs

VOCAB_MAP = torch.arange(97)  # identity: every target token is a draft token here


def test_batches_carry_the_sequence_tokens_after_each_root(tiny_data):
    anchors = AnchorSet(tiny_data, context=4, depth=3)
    batch = anchors.batch(torch.arange(len(anchors)), VOCAB_MAP)
    for (s, q, t), following in zip(batch.anchors.tolist(), batch.next_tokens.tolist()):
        ids = anchors.sequence(s, q)
        at = anchors.full_position(s, q, t)
        after = ids[at + 1:at + 4]
        assert following == after + [-1] * (3 - len(after))
    assert (batch.next_tokens[:, 0] == -1).any()  # the last position of a sequence has no next token


def test_known_inputs_give_the_depth1_token_and_drop_its_teacher_row(tiny_data):
    anchors = AnchorSet(tiny_data, context=4, depth=3)
    batch = anchors.batch(torch.arange(len(anchors)), VOCAB_MAP)
    known = (torch.arange(len(anchors)) % 2 == 0).long()
    given, probs = _known_inputs(batch, known, 1)
    has_next = batch.next_tokens[:, 0] >= 0
    assert torch.equal(given[:, 0], torch.where(known.bool(), batch.next_tokens[:, 0], -1))
    assert torch.equal(probs[:, 1:], batch.teacher_probs[:, 1:])
    dropped = known.bool() & has_next
    assert (probs[dropped, 0] == 0).all()
    assert torch.equal(probs[~dropped, 0], batch.teacher_probs[~dropped, 0])


def test_known_inputs_give_each_row_its_own_number_of_leading_tokens(tiny_data):
    anchors = AnchorSet(tiny_data, context=4, depth=3)
    batch = anchors.batch(torch.arange(len(anchors)), VOCAB_MAP)
    known = torch.arange(len(anchors)) % 3  # 0, 1 or 2 leading tokens given
    given, probs = _known_inputs(batch, known, 2)
    assert given.shape == (len(anchors), 2)
    for row, count in enumerate(known.tolist()):
        for d in range(2):
            token = int(batch.next_tokens[row, d])
            assert int(given[row, d]) == (token if d < count else -1)
            dropped = d < count and token >= 0
            assert (probs[row, d] == 0).all() if dropped else torch.equal(probs[row, d], batch.teacher_probs[row, d])
        assert torch.equal(probs[row, 2], batch.teacher_probs[row, 2])  # the depth below a given path is taught
