"""The one place for temperature rules, the top-k / top-p warpers and seeded random draws.

Every verifier, the decoding loop and the autoregressive baseline go through
these functions, so T = 0 means argmax everywhere and a seed reproduces a run.
The warpers (`warp_logits`) are transformers' own logits processors, run in
the order `generate` runs them, so a warped target law here is the law
`model.generate(do_sample=True, top_k=..., top_p=...)` samples from.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import torch

# Seeds are 32-bit (as numpy's): the seeds derived from one (seed x 1_000_003 + step, seed + a hash) then stay
# inside the 64-bit range torch's generators take.
MAX_SEED = 2 ** 32 - 1


def check_temperature(temperature: float) -> float:
    """Return the temperature as a float, or raise a clear ValueError."""
    try:
        value = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"temperature must be a number, got {temperature!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"temperature must be finite, got {value}")
    if value < 0:
        raise ValueError(f"temperature must be >= 0, got {value}")
    return value


def check_warpers(top_k: int | None, top_p: float | None) -> tuple[int | None, float | None]:
    """top_k (None or 0: off; else an integer >= 1) and top_p (None or 1: off; else in (0, 1)), as `generate`
    reads them, with the ones that change nothing turned into None; a ValueError names a bad value."""
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {top_k!r}")
    if top_p is not None:
        try:
            value = float(top_p)
        except (TypeError, ValueError):
            raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}") from None
        if not 0.0 < value <= 1.0:
            raise ValueError(f"top_p must be a number in (0, 1] (1 = off), got {top_p!r}")
        top_p = value
    return (top_k or None), (None if top_p is None or top_p >= 1.0 else top_p)


def warp_logits(logits: torch.Tensor, temperature: float, top_k: int | None = None,
                top_p: float | None = None) -> torch.Tensor:
    """`logits` (rows along the last axis) with every token the warpers drop set to -inf.

    The kept set of each row is what transformers' `TemperatureLogitsWarper`,
    `TopKLogitsWarper` and `TopPLogitsWarper` keep, in that order (top-p
    reads the tempered, top-k-cut row), so softmax(warped / T) is the law
    `generate` samples from, and every rule, flow and bonus that reads the
    warped rows verifies against it. At T = 0 (greedy: `generate` applies no
    warper) and with no warper the rows come back as they are.
    """
    top_k, top_p = check_warpers(top_k, top_p)
    if is_greedy(temperature) or (top_k is None and top_p is None):
        return logits
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)

    scores = logits if logits.dtype == torch.float64 else logits.float()
    rows = scores.reshape(-1, scores.shape[-1])
    warpers = [TemperatureLogitsWarper(float(temperature))]
    warpers += [TopKLogitsWarper(top_k)] if top_k is not None else []
    warpers += [TopPLogitsWarper(top_p)] if top_p is not None else []
    for warper in warpers:
        rows = warper(None, rows)
    dropped = (rows == -math.inf).reshape(logits.shape)
    return logits.masked_fill(dropped.to(logits.device), -math.inf)


def is_greedy(temperature: float) -> bool:
    """T = 0 means deterministic argmax decoding (of a temperature already checked at the boundary)."""
    return temperature == 0.0


def log_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Target log-probabilities of logits at a temperature, along the last axis.

    At T = 0 the distribution is a point mass on the argmax (first index on
    ties), written as 0 / -inf, so every law stays well defined. float64
    logits stay float64 (exact laws in tests); anything else becomes float32.
    """
    logits = logits if logits.dtype == torch.float64 else logits.float()
    if is_greedy(temperature):
        out = torch.full_like(logits, -math.inf)
        return out.scatter_(-1, logits.argmax(-1, keepdim=True), 0.0)
    return torch.log_softmax(logits / temperature, dim=-1)


def probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Target probabilities of logits at a temperature (see `log_probs`)."""
    return log_probs(logits, temperature).exp()


def token_log_probs(logits: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor,
                    temperature: float, scratch: bool = False, dtype: torch.dtype | None = None) -> torch.Tensor:
    """log p(tokens[i] | row rows[i]) at a temperature, normalising each row asked for once.

    The same values as `log_probs(logits, T)[rows, tokens]`, but it copies
    only the rows it needs (as `dtype`; default float64 for float64 logits,
    else float32) and writes no V-wide output: the hot path of a verifier
    that reads a few entries of many rows. With `scratch`, `logits` is the
    caller's throwaway copy (float32 or float64) and is overwritten instead
    of copied when every row is asked for.
    """
    used, slot = torch.unique(rows, return_inverse=True)
    dtype = dtype or (torch.float64 if logits.dtype == torch.float64 else torch.float32)
    if scratch and used.numel() == logits.shape[0] and logits.dtype == dtype:
        picked = logits  # unique() sorts, so slot indexes the rows as they are
    else:
        picked = logits.index_select(0, used.to(logits.device)).to(dtype)
    slot, tokens = slot.to(logits.device), tokens.to(logits.device)
    if is_greedy(temperature):
        return torch.where(picked.argmax(-1)[slot] == tokens, 0.0, -math.inf).to(picked.dtype)
    if temperature != 1.0:
        picked.div_(temperature)
    chosen = picked[slot, tokens]
    top = picked.amax(-1, keepdim=True)
    log_norm = picked.sub_(top).exp_().sum(-1).log_() + top.squeeze(-1)  # in place on the copy
    return chosen - log_norm[slot]


def masked_probs(logits: torch.Tensor, temperature: float, banned: torch.Tensor) -> torch.Tensor:
    """The law `draw_token` and `masked_draws` sample with `banned`: p at T over the allowed tokens, renormalised.

    At T = 0 it is the point mass on the argmax of the allowed tokens. The
    exactness tests and the laws compare counts against it.
    """
    if bool(banned.all(-1).any()):
        raise ValueError("every token of a row is banned: there is nothing left to draw")
    return probs(logits.masked_fill(banned, -math.inf), temperature)


def seed_from_global_rng() -> int:
    """A seed drawn from torch's global generator (it is read, never seeded): a caller's `torch.manual_seed` before
    `model.generate` then reproduces a sampled decode, as it does transformers' own sampling."""
    return int(torch.randint(0, MAX_SEED, (1,)).item())


def draw_seed(seed: int, *cell: object) -> int:
    """The seed of one decode: `--seed` plus a hash of its set, temperature, prompt and method (bench's cells).

    With one seed per prompt index shared by every cell, TEV drew the same
    uniforms round by round in every set, budget and verifier, so the cells'
    length gaps were correlated and could not be pooled as independent.
    """
    return seed + zlib.crc32("/".join(map(str, cell)).encode())


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A seeded torch generator on the device where the draws happen."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator


@contextmanager
def seeded_torch_rng(seed: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """Run code that draws from torch's global generator (module init, dropout, HF `generate`), none of
    which takes a generator, under `seed`, and give every caller its random state back afterwards."""
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else [], device_type=device.type):
        torch.manual_seed(int(seed))
        yield


def draw_token(
    logits: torch.Tensor,
    temperature: float,
    generator: torch.Generator,
    banned: torch.Tensor | None = None,
) -> torch.Tensor:
    """One draw from softmax(logits / T) over a (V,) row, without the `banned` tokens (True = excluded).

    At T = 0 it is the argmax of what is left. At T > 0 it inverts the CDF:
    the weights exp((l - max) / T) in float32, their running sum in float64,
    one float64 uniform below the total and a binary search. That is one exp
    pass and one uniform, where a Gumbel-max draws V uniforms and takes two
    logs of each (over a large vocabulary, and every round draws one).
    A token of zero weight (banned, -inf, or too small to move the float64
    sum) has an empty interval and is never drawn. This is the single
    sampler of one token: the decode loop's bonus, the walker's AR step.
    """
    scores = logits.float()
    if banned is not None:
        scores = scores.masked_fill(banned, -math.inf)
    if is_greedy(temperature):
        return scores.argmax(-1)
    weights = scores / temperature  # a new tensor (dividing by 1 is exact)
    weights.sub_(weights.max()).exp_()
    return _invert_cdf(weights.to(torch.float64).cumsum_(-1), generator, 1)[0]


def sample_index(weights: torch.Tensor, generator: torch.Generator, n: int = 1) -> torch.Tensor:
    """Draw n indices from unnormalised non-negative weights (a categorical law), on the generator's device."""
    weights = weights.to(generator.device, torch.float64)
    return torch.multinomial(weights, n, replacement=True, generator=generator)


def uniform(shape: tuple[int, ...], generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """float64 uniforms on [0, 1): the accept-or-reject draws of the sequential rules."""
    return torch.rand(shape, generator=generator, dtype=torch.float64, device=device)


def masked_draws(logits: torch.Tensor, temperature: float, banned: torch.Tensor, generator: torch.Generator,
                 n: int) -> torch.Tensor:
    """(n,) draws from softmax(logits / T) without `banned` tokens (one (V,) row).

    One draw is `draw_token` over the row; many are one categorical call
    over `masked_probs` in float64. Both sample the same law.
    """
    if n == 1:
        return draw_token(logits, temperature, generator, banned=banned).reshape(1)
    if is_greedy(temperature):
        return draw_token(logits, 0.0, generator, banned=banned).repeat(n)
    return sample_index(masked_probs(logits.double(), temperature, banned), generator, n)


def draw_proposals(probs: torch.Tensor, k: int, replace: bool, generator: torch.Generator) -> list[int]:
    """k draws from a proposal row (V,) of probabilities: i.i.d., or one after another without replacement.

    Without replacement each draw comes from the row with the earlier draws
    removed and renormalised (`torch.multinomial`'s law), and k is cut to the
    tokens of non-zero probability. A sampled tree's children are these draws.
    Each draw inverts the running sum in float64 (as `draw_token` does), which
    over a 49k vocabulary is many times quicker than `torch.multinomial`.
    """
    weights = probs.to(generator.device, torch.float64)
    if replace:
        return _invert_cdf(weights.cumsum(-1), generator, int(k)).tolist()
    weights = weights.clone()
    drawn = []
    for _ in range(min(int(k), int((weights > 0).sum()))):
        token = int(_invert_cdf(weights.cumsum(-1), generator, 1)[0])
        drawn.append(token)
        weights[token] = 0.0
    return drawn


def _invert_cdf(cdf: torch.Tensor, generator: torch.Generator, n: int) -> torch.Tensor:
    """(n,) i.i.d. indices of the categorical law whose running sum of weights is `cdf` (float64, total > 0):
    a zero-weight index has an empty interval and is never drawn."""
    total = cdf[-1:]
    if not bool(total[0] > 0):
        raise ValueError("every token of the row is banned or has zero probability: there is nothing to draw")
    below = torch.nextafter(total, torch.zeros_like(total))  # u < total always, so the search stays in the row
    u = torch.minimum(torch.rand(n, generator=generator, dtype=torch.float64, device=cdf.device) * total, below)
    return torch.searchsorted(cdf, u, right=True)
