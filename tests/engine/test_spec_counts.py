"""vLLM-named counts off round records: drafts, draft tokens, accepted tokens (no bonus), per position."""

from __future__ import annotations

import torch

from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord
from tevcore.engine.spec_counts import spec_decode_counts
from tevcore.engine.tree import DraftTree


def _record(parents: list[int], path: list[int]) -> RoundRecord:
    tree = DraftTree(tokens=torch.arange(len(parents)) + 3, parents=torch.tensor(parents),
                     draft_logp=torch.zeros(len(parents)))
    flow = target_flow(tree, torch.zeros(len(parents), 16), 1.0)
    return RoundRecord(index=0, proposer="p", builder="b", budget=8, temperature=1.0, context_length=3, tree=tree,
                       flow=flow, token_texts=[], missing_texts=[], path=path, emitted_tokens=[1] * len(path))


def test_counts_of_three_rounds():
    records = [_record([-1, 0, 0, 1, 3], [0, 1, 3, 4]),  # 4 draft tokens, 3 accepted (depths 1, 2, 3)
               _record([-1, 0, 0], [0]),  # 2 draft tokens, none accepted
               _record([-1], [0])]  # a skipped draft: not a draft
    counts = spec_decode_counts(records)
    assert (counts.num_drafts, counts.num_draft_tokens, counts.num_accepted_tokens) == (2, 6, 3)
    assert counts.num_accepted_tokens_per_pos == [1, 1, 1]
    assert counts.acceptance_rate == 0.5 and counts.mean_acceptance_length == 2.5
    assert counts.acceptance_rate_per_pos == [0.5, 0.5, 0.5]
    assert counts.to_dict()["num_drafts"] == 2


def test_no_draft_gives_zero_counts():
    counts = spec_decode_counts([_record([-1], [0])])
    assert counts.num_drafts == 0 and counts.acceptance_rate == 0.0 and counts.mean_acceptance_length == 1.0
