"""What the app claims about laws and bounds, worded once with its scope (no streamlit).

Two schools of exactness (`docs/sampled-trees.md`): a rule exact on every given
tree emits target samples whatever the tree, so it cannot accept a node v more
often than P(v) and its mean block length is at most 1 + C; a proposal-ratio
rule is exact only over the draw of a sampled tree, so on one realised tree it
can accept v more often than P(v) and exceed 1 + C. Which rule belongs where
is read from the engine (`tevcore.verify.laws.standing`), never listed here.
"""

from __future__ import annotations

from tevcore.studio.coupling import coupling, coupling_presets
from tevcore.verify.laws import OPTIMAL, OVER_DRAWS, OWN_LAW
from tevcore.verify.registry import standing
from tevcore.verify.verifiers import ALL_VERIFIERS

TEV_EXPANDED = "TEV (Tree Exit Verification: one draw of the exit node over X, one of the bonus token)"


def rules_with(kinds: tuple[str, ...], temperature: float = 1.0) -> list[str]:
    """The registered rules whose standing at `temperature` is one of `kinds`, in registry order."""
    return [name for name in ALL_VERIFIERS if standing(name, temperature) in kinds]


def bound_claim() -> str:
    """The 1 + C bound with its scope: who it binds, who reaches it, and who it does not bind."""
    given = ", ".join(rules_with((OPTIMAL, OWN_LAW)))
    optimal = ", ".join(rules_with((OPTIMAL,)))
    ratio = ", ".join(rules_with((OVER_DRAWS,)))
    name, table = next(iter(coupling_presets().items()))
    preset = coupling(table)
    return (f"For a rule that is exact on every given tree ({given}), every token it emits is a genuine target "
            f"sample whatever the tree, so it cannot accept *v* more often than *P(v)*: its mean block length is at "
            f"most *1 + C*, the sum of *P* over the tree plus the bonus, and the optimal ones ({optimal}) reach it. "
            f"A proposal-ratio rule on a sampled tree ({ratio}) is exact only over the draw of the tree: on one "
            f"realised tree it can accept *v* more often than *P(v)*, so *1 + C* is its yardstick, not its cap "
            f"(the workshop's preset '{name}': a node drawn from q is accepted with {preset.sampled_accept:.4f} "
            f"where the fixed guess gets {preset.fixed_accept:.4f}).")


def over_draws_note(verifier: str, tree=None, temperature: float = 1.0) -> str | None:
    """Why `verifier`'s block lengths may exceed 1 + C, worded for the tree design shown (`tree`: a round's tree,
    sampled, mixed or fixed); None for a rule 1 + C binds, and at T = 0, where the target is greedy and a rule
    exact over the draws accepts exactly the argmax path, so its block length is 1 + C."""
    if standing(verifier, temperature) != OVER_DRAWS or temperature == 0:
        return None
    draws = getattr(tree, "draws", None)
    if draws is not None and draws.mixed:
        how = ("the siblings were drawn from the drafter's q without the fixed child, and it divides each by that "
               "proposal (the fixed child, chosen not drawn, is reached through the residual left when every "
               "sibling was rejected)")
    else:
        how = "the children were drawn from the drafter's q and it divides by that q"
    return (f"{verifier} is exact only over the draw of the tree ({how}), not on each given tree: on one realised "
            f"tree it can accept a node more often than the target's P(v), so its block length can exceed that "
            f"tree's 1 + C, and on another fall short. 1 + C is the yardstick of the rules exact on every given "
            f"tree, not a cap on {verifier}.")


def gap_claim(names: list[str], temperature: float) -> str:
    """The across-rounds gap E[L] - E[1 + C], rule by rule: zero only for the optimal rules."""
    kind = {n: standing(n, temperature) for n in names}
    optimal = [n for n in names if kind[n] == OPTIMAL]
    other = [n for n in names if kind[n] not in (OPTIMAL, OVER_DRAWS)]
    own = [n for n in other if kind[n] == OWN_LAW]
    ratio = [n for n in names if kind[n] == OVER_DRAWS]
    parts = []
    if optimal:
        parts.append(f"only the optimal rules ({', '.join(optimal)}) have E[L | tree] = 1 + C(tree), so only their "
                     f"gap is zero up to noise")
    if other:
        parts.append(f"{', '.join(other)} do not follow X (each is tested against a law of its own, or is not exact "
                     f"for this target), so their gap need not be zero"
                     + (f"; {', '.join(own)}, exact with its own law, falls at or below 1 + C" if own else ""))
    if ratio:
        parts.append(f"the proposal-ratio rules ({', '.join(ratio)}) are exact only over the tree's draw, so 1 + C "
                     f"is their yardstick, not their cap: their gap may be positive")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:] + "." if parts else ""
