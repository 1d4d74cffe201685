"""Negative controls of the conformance suite: verifiers with the reference signature, each wrong in one known way.

Each is a distribution bug serving engines have shipped in tree verifiers at
T > 0; the suite must fail every one of them on at least one named case, or
it has no power (tests/verify/test_conformance.py checks that it does).

- `shifted_logits_slice`: node v is verified against row v + 1 (an
  off-by-one slice of the tree's logits).
- `residual_not_renormalised`: children tried in order with the residual
  zeroed at each rejected token but not renormalised, so a later sibling is
  accepted with p(x) instead of p(x) / (mass left).
- `residual_keeps_rejected_mass`: the residual is never updated, so a
  rejected token keeps its mass and comes back as the bonus (it over-weights
  the first child's token).
- `argmax_at_verify`: the verdict of T = 0 (greedy) whatever the request's
  temperature.
- `warpers_on_q_not_p`: the request's top-k / top-p shape the proposal the
  tree was drawn from, but verification reads the raw target.

The two residual controls are the residual rule written over plain tensors
with its one bug; the others run the reference with one argument wrong.
"""

from __future__ import annotations

import torch

from tevcore.engine.sampling import draw_token, probs, uniform, warp_logits
from tevcore.verify.reference import verify as reference_verify


def shifted_logits_slice(logits: torch.Tensor, parents, tokens, **arguments) -> tuple[list[int], int]:
    """The reference fed row v + 1 for node v (the last row repeated at the end)."""
    logits = torch.as_tensor(logits)
    rows = torch.arange(1, logits.shape[0] + 1).clamp_max(logits.shape[0] - 1)
    return reference_verify(logits[rows], parents, tokens, **arguments)


def argmax_at_verify(logits: torch.Tensor, parents, tokens, **arguments) -> tuple[list[int], int]:
    """The reference at T = 0 whatever temperature the request asked for."""
    return reference_verify(logits, parents, tokens, **{**arguments, "temperature": 0.0})


def warpers_on_q_not_p(logits: torch.Tensor, parents, tokens, **arguments) -> tuple[list[int], int]:
    """The reference with the target left unwarped (the proposal rows keep whatever warping drew from them)."""
    return reference_verify(logits, parents, tokens, **{**arguments, "top_k": None, "top_p": None})


def _residual_walk(logits: torch.Tensor, parents, tokens, temperature: float, top_k: int | None,
                   top_p: float | None, generator: torch.Generator, renormalise: bool,
                   zero_rejected: bool) -> tuple[list[int], int]:
    """The sequential residual rule over children in index order, with the update steps switched as asked."""
    logits = torch.as_tensor(logits).double()
    if temperature == 0:  # at T = 0 the residual rule is greedy follow: no bug can show
        return reference_verify(logits, parents, tokens, temperature=0.0, generator=generator)
    p = probs(warp_logits(logits, temperature, top_k, top_p), temperature)
    parents, tokens = [int(x) for x in parents], [int(x) for x in tokens]
    children = [[c for c in range(1, len(parents)) if parents[c] == node] for node in range(len(parents))]
    node, path = 0, [0]
    while True:
        residual = p[node].clone()
        for child in children[node]:
            token = tokens[child]
            accept = float(residual[token] / residual.sum()) if renormalise else float(residual[token])
            if float(uniform((1,), generator, residual.device)[0]) < accept:
                node = child
                path.append(child)
                break
            if zero_rejected:
                residual[token] = 0.0
        else:
            bonus = draw_token(residual.clamp_min(1e-300).log(), 1.0, generator, banned=residual <= 0)
            return path, int(bonus)


def residual_not_renormalised(logits: torch.Tensor, parents, tokens, *, temperature: float = 1.0,
                              top_k: int | None = None, top_p: float | None = None, generator: torch.Generator,
                              **draws) -> tuple[list[int], int]:
    """The residual rule accepting a later sibling with its unrenormalised residual mass (draws ignored: the
    residual rule is exact on any tree, so only this bug can move its law)."""
    return _residual_walk(logits, parents, tokens, temperature, top_k, top_p, generator, renormalise=False,
                          zero_rejected=True)


def residual_keeps_rejected_mass(logits: torch.Tensor, parents, tokens, *, temperature: float = 1.0,
                                 top_k: int | None = None, top_p: float | None = None, generator: torch.Generator,
                                 **draws) -> tuple[list[int], int]:
    """The residual rule that never removes a rejected token from the residual (draws ignored, as above)."""
    return _residual_walk(logits, parents, tokens, temperature, top_k, top_p, generator, renormalise=True,
                          zero_rejected=False)


CONTROLS = {"shifted_logits_slice": shifted_logits_slice, "residual_not_renormalised": residual_not_renormalised,
            "residual_keeps_rejected_mass": residual_keeps_rejected_mass, "argmax_at_verify": argmax_at_verify,
            "warpers_on_q_not_p": warpers_on_q_not_p}
