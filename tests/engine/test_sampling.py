"""token_log_probs: the entries of log_probs, whether it copies the rows or works in the caller's scratch copy."""

import pytest
import torch

from tevcore.engine.sampling import log_probs, token_log_probs


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("rows", [[0, 2, 2, 1, 3], [2, 0]])  # every row, then a subset
def test_token_log_probs_are_entries_of_log_probs(temperature, rows):
    logits = 4 * torch.randn(4, 1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    rows = torch.tensor(rows)
    tokens = torch.randint(0, 1000, (len(rows),), generator=torch.Generator().manual_seed(1))
    tokens[0] = int(logits[rows[0]].argmax())  # one finite entry at T = 0
    expected = log_probs(logits, temperature)[rows, tokens]
    kept = logits.clone()
    torch.testing.assert_close(token_log_probs(logits, rows, tokens, temperature), expected, rtol=0, atol=1e-12)
    assert torch.equal(logits, kept)  # without scratch the caller's logits are untouched
    scratch = logits.clone()
    torch.testing.assert_close(token_log_probs(scratch, rows, tokens, temperature, scratch=True), expected,
                               rtol=0, atol=1e-12)


def test_seeded_torch_rng_repeats_its_draws_and_gives_the_callers_state_back():
    from tevcore.engine.sampling import seeded_torch_rng

    torch.manual_seed(11)  # the caller's own stream, as a test would set it
    expected = torch.rand(3)
    torch.manual_seed(11)
    with seeded_torch_rng(5):
        first = torch.nn.Linear(4, 4).weight.detach().clone()
    with seeded_torch_rng(5):
        second = torch.nn.Linear(4, 4).weight.detach().clone()
    assert torch.equal(first, second)
    assert torch.equal(torch.rand(3), expected)  # the seeded block left the caller's stream where it was
