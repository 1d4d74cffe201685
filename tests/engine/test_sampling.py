"""token_log_probs: the entries of log_probs, whether it copies the rows or works in the caller's scratch copy."""

import math

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


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.5])
def test_draw_token_samples_the_masked_law_and_never_a_banned_or_zero_token(temperature):
    """The one-token sampler (every bonus, every AR step) against `masked_probs`, by the project's chi-square;
    a sampler that gives the head of the law 20% too little fails at these draws."""
    import numpy as np

    from tevcore.engine.sampling import draw_token, make_generator, masked_probs
    from tevcore.verify.laws import chi_square, chi_square_pvalue

    logits = torch.randn(12, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    logits[7] = -math.inf  # an exact zero
    banned = torch.zeros(12, dtype=torch.bool)
    banned[[0, 3]] = True
    law = masked_probs(logits, temperature, banned).numpy()
    generator = make_generator(4)
    draws = torch.stack([draw_token(logits, temperature, generator, banned) for _ in range(6000)])
    counts = np.bincount(draws.numpy(), minlength=12)
    assert counts[[0, 3, 7]].sum() == 0
    assert chi_square_pvalue(*chi_square(counts, law)) > 1e-3
    skewed = law.copy()
    skewed[law.argmax()] *= 0.8
    assert chi_square_pvalue(*chi_square(counts, skewed / skewed.sum())) < 1e-3  # the test has the power


def test_draw_token_refuses_a_row_with_nothing_left():
    from tevcore.engine.sampling import draw_token, make_generator

    with pytest.raises(ValueError, match="nothing to draw"):
        draw_token(torch.zeros(4), 1.0, make_generator(0), torch.ones(4, dtype=torch.bool))


@pytest.mark.parametrize("replace", [True, False])
def test_draw_proposals_samples_the_ordered_law_of_iid_and_successive_draws(replace):
    """The sampled builders' draws: the ordered pair (first, second) against its exact law, i.i.d. p(a) p(b) or,
    without replacement, p(a) p(b) / (1 - p(a)); zero-probability tokens are never drawn, and k is cut to the
    tokens that can be."""
    import numpy as np

    from tevcore.engine.sampling import draw_proposals, make_generator
    from tevcore.verify.laws import chi_square, chi_square_pvalue

    p = torch.tensor([0.4, 0.0, 0.25, 0.2, 0.1, 0.05], dtype=torch.float64)
    law = torch.outer(p, p) if replace else torch.outer(p, p) / (1 - p)[:, None]
    if not replace:
        law.fill_diagonal_(0.0)
    generator = make_generator(9)
    pairs = [draw_proposals(p, 2, replace, generator) for _ in range(8000)]
    counts = np.bincount([a * 6 + b for a, b in pairs], minlength=36)
    assert counts.reshape(6, 6)[1].sum() + counts.reshape(6, 6)[:, 1].sum() == 0
    assert chi_square_pvalue(*chi_square(counts, law.flatten().numpy())) > 1e-3
    foil = torch.outer(p, p) / (1 - p)[:, None] if replace else torch.outer(p, p)  # the other mode's law
    if replace:
        foil.fill_diagonal_(0.0)
    assert chi_square_pvalue(*chi_square(counts, (foil / foil.sum()).flatten().numpy())) < 1e-3
    assert len(draw_proposals(p, 9, replace, generator)) == (9 if replace else 5)
