"""The drafter kinds, and the one parser of proposer specs.

Every spec a user types (`--proposer`, eval-drafter's drafter and
`--compare`, `train --init`, compare's `--init`, the app's choice) goes
through `find_kind`: each registered kind is asked in turn whether the spec
is its own. A '+lookup' suffix mixes the context lookup into any kind and
'default' is 'drafter+lookup'. Help texts are built from the same list, so a
kind added here is named everywhere. Adding a kind: one module defining its
`DrafterKind`, one line in `KINDS`.
"""

from __future__ import annotations

import torch

from tevcore.proposers import base, block_training, dflash_training, draft_lm, lookup
from tevcore.proposer_protocol import Proposer
from tevcore.proposers.kind import DrafterKind, LoadOptions, Trainer
from tevcore.target.loading import Target

# asked in this order: a kind that takes any folder (the block drafter) comes after those that recognise theirs
KINDS: dict[str, DrafterKind] = {kind.name: kind for kind in (
    base.ROLLOUT_KIND,
    lookup.KIND,
    draft_lm.KIND,
    dflash_training.KIND,
    block_training.KIND,
)}
ALIASES = {"default": "drafter" + lookup.SUFFIX}
FRESH_KIND = block_training.KIND.name  # what `train` trains without --init


def proposer_specs() -> str:
    """The help text of a proposer flag: every kind's spec, the alias and the lookup suffix."""
    specs = ", ".join(f"'{kind.spec}' ({kind.help})" for kind in KINDS.values())
    return f"'default' (= 'drafter{lookup.SUFFIX}'), {specs}; any of these + '{lookup.SUFFIX}' mixes in the context lookup"


def ready_specs() -> list[str]:
    """The specs that name no folder, 'default' first: the choices a menu offers before any folder."""
    return [*ALIASES, *(spec for kind in KINDS.values() for spec in kind.ready)]


def trainable_specs() -> str:
    """The help text of a starting-drafter flag: the specs of every trainable kind."""
    return ", ".join(f"'{kind.spec}'" for kind in KINDS.values() if kind.trainer is not None)


def find_kind(spec: str) -> tuple[DrafterKind, str]:
    """The kind a spec names (without a '+lookup' suffix) and the source it loads from."""
    for kind in KINDS.values():
        source = kind.claims(spec)
        if source is not None:
            return kind, source
    raise ValueError(f"unknown proposer {spec!r}: use {proposer_specs()}")


def _unmixed(spec: str) -> tuple[str, bool]:
    """The spec without its alias and '+lookup' suffix, and whether the lookup is mixed in."""
    spec = ALIASES.get(spec, spec)
    mixed = spec.endswith(lookup.SUFFIX) and spec != lookup.SUFFIX
    return (spec.removesuffix(lookup.SUFFIX) if mixed else spec), mixed


def kind_of(spec: str) -> DrafterKind:
    """The kind a full spec names ('default' and a '+lookup' suffix included)."""
    return find_kind(_unmixed(spec)[0])[0]


def resolve_proposer(spec: str, target: Target, drafter_dtype: torch.dtype | None = None,
                     branches: int | None = None, name: str | None = None) -> Proposer:
    """The proposer a spec names, loaded against `target`; `drafter_dtype`, `branches` and `name` go to its kind."""
    base_spec, mixed = _unmixed(spec)
    kind, source = find_kind(base_spec)
    proposer = kind.load(source, target, LoadOptions(drafter_dtype, branches, name))
    return lookup.ContextLookupProposer(proposer) if mixed else proposer


def trainer_for(spec: str | None) -> tuple[DrafterKind, Trainer, str | None]:
    """The kind a training run starts from (`train --init`; None: a fresh drafter), its trainer and source."""
    if spec is None:
        kind, source = KINDS[FRESH_KIND], None
    else:
        kind, source = find_kind(spec)
    if kind.trainer is None:
        trainable = ", ".join(k.name for k in KINDS.values() if k.trainer is not None)
        raise ValueError(f"{spec!r} is a {kind.name}, which cannot be trained; start from one of: {trainable}")
    return kind, kind.trainer, source
