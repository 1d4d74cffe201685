"""Top-k / top-p warping lives in sampling.py and is transformers' own: the same law `generate` samples from."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from tevcore.config import DecodeConfig
from tevcore.engine.sampling import check_warpers, probs, warp_logits


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 20, 0.9), (0.7, 5, None), (1.3, None, 0.5),
                                                     (1.0, 1, None), (2.0, 50, 0.99)])
def test_the_warped_law_is_the_one_transformers_samples(temperature, top_k, top_p):
    logits = 3 * torch.randn(6, 200, generator=torch.Generator().manual_seed(0))
    warpers = [TemperatureLogitsWarper(temperature)]
    warpers += [TopKLogitsWarper(top_k)] if top_k else []
    warpers += [TopPLogitsWarper(top_p)] if top_p else []
    theirs = LogitsProcessorList(warpers)(None, logits.clone()).softmax(-1)
    ours = probs(warp_logits(logits, temperature, top_k, top_p), temperature)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert torch.equal(ours > 0, theirs > 0)  # the same kept set, token for token


def test_greedy_and_no_warper_leave_the_rows_as_they_are():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    assert warp_logits(logits, 0.0, 5, 0.5) is logits
    assert warp_logits(logits, 1.0, None, None) is logits
    assert warp_logits(logits, 1.0, 0, 1.0) is logits  # generate's "off" values
    assert torch.isinf(warp_logits(logits.double(), 1.0, 5)).sum() == 3 * 45


@pytest.mark.parametrize("top_k,top_p,message", [(-1, None, "top_k must be"), (2.5, None, "top_k must be"),
                                                 (None, 0.0, "top_p must be"), (None, 1.5, "top_p must be"),
                                                 (None, "x", "top_p must be")])
def test_bad_warpers_are_one_line_errors(top_k, top_p, message):
    with pytest.raises(ValueError, match=message):
        check_warpers(top_k, top_p)
    with pytest.raises(ValueError, match=message):
        DecodeConfig(temperature=1.0, top_k=top_k, top_p=top_p)


def test_the_config_keeps_warpers_that_change_something():
    assert (DecodeConfig(top_k=0, top_p=1.0).top_k, DecodeConfig(top_k=0, top_p=1.0).top_p) == (None, None)
    config = DecodeConfig(temperature=1.0, top_k=20, top_p=0.9)
    assert (config.top_k, config.top_p) == (20, 0.9) and config.to_dict()["top_k"] == 20
    assert not math.isinf(float(warp_logits(torch.zeros(1, 4), 1.0, 2)[0, 0]))
