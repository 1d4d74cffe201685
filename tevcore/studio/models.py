"""The models and prompts a page works with: a target loaded by its spec, a drafter for it (or the stand-in, with a
note saying why), the drafters a page offers, a benchmark set's prompts and a token's text.

The app keeps one loaded copy of each per server (its `st.cache_resource` wrappers in `app/shared_ui.py` call these
functions); a service that needs a model inside its queue turn is handed `Models`, the cached loaders, so the
loading is counted in the turn and the cache stays the app's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the model code (and transformers) loads when a model does, not with every page
    from tevcore.proposer_protocol import Proposer
    from tevcore.target.loading import Target

STAND_IN = "rollout"  # the drafter every target has: its own greedy rollout


@dataclass(frozen=True)
class Models:
    """The app's cached loaders: `target(spec)`, and `drafter(spec, target_spec)` giving (drafter, note) where the
    note says why a stand-in drafts instead (`drafter_with_fallback`)."""

    target: Callable[[str], Target]
    drafter: Callable[[str, str], tuple[Proposer, str | None]]


def model_spec_key(spec: str) -> str:
    """One key per model however its path is spelt (`x`, `x/`, `./x`): an existing path resolves."""
    path = Path(spec).expanduser()
    return str(path.resolve()) if spec and path.exists() else spec


def load_target(spec: str, threads: int) -> Target:
    """The target `spec` names on TEV_APP_DEVICE (else the engine's choice), torch using `threads` CPU threads."""
    import torch

    from tevcore.target import loading

    torch.set_num_threads(threads)
    return loading.load_target(spec, device=os.environ.get("TEV_APP_DEVICE") or None)


def load_drafter(spec: str, target: Target) -> Proposer:
    """The drafter a `--proposer` spec names, for `target`."""
    from tevcore.proposers.registry import resolve_proposer

    return resolve_proposer(spec, target)


def drafter_choices(active: str | None = None) -> list[str]:
    """The drafters a page offers: `active` (a folder chosen as the drafter) first, alone and with the context
    lookup mixed in, then every drafter spec that needs no path."""
    from tevcore.proposers.lookup import SUFFIX
    from tevcore.proposers.registry import ready_specs

    return ([active, active + SUFFIX] if active else []) + ready_specs()


def drafters_help() -> str:
    """The drafter specs in one line, for a box's help."""
    from tevcore.proposers.registry import proposer_specs

    return proposer_specs()


def _asks_for_stand_in(spec: str) -> bool:
    from tevcore.proposers.base import ROLLOUT_KIND
    from tevcore.proposers.registry import kind_of

    try:
        return kind_of(spec) is ROLLOUT_KIND
    except ValueError:
        return False


def drafter_with_fallback(spec: str, load: Callable[[str], Proposer]) -> tuple[Proposer, str | None]:
    """(drafter, note): `load(spec)`, or the stand-in (`load("rollout")`) with a note saying why it drafts."""
    try:
        proposer = load(spec)
        if not _asks_for_stand_in(spec) and proposer.stand_in:
            return proposer, (f"drafter {spec!r} is not available here (no committed drafter for this target); "
                              f"the engine uses the stand-in proposer: {proposer.name}")
        return proposer, None
    except Exception as err:  # a missing or damaged drafter folder: fall back, say so
        if _asks_for_stand_in(spec):
            raise
        return load(STAND_IN), (f"drafter {spec!r} is not available ({err}); using the stand-in proposer "
                                "(target greedy rollout)")


def prompt_items(set_name: str, n: int = 40) -> list[tuple[str, str]]:
    """(label, text) pairs of a benchmark prompt set (held-out split)."""
    from tevcore.lab.datasets import load_prompts

    items = load_prompts(set_name, split="heldout", n=n)
    return [(f"{p.item_id}: {p.text[:70].strip()}", p.text) for p in items]


def decode_text(target: Target, token: int) -> str:
    """One token's text (a byte piece of a character marked as its bytes)."""
    from tevcore.target.token_text import token_texts

    return token_texts(target.tokenizer, [int(token)])[0]
