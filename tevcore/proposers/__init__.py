"""Proposers: given the committed context, propose per-depth draft rows for the tree builder.

The block drafter (block.py: one pass gives K per-depth distributions, trained
with ExitTrain), a draft LM (draft_lm.py: grows its own tree), the context
lookup (lookup.py) and the greedy rollout stand-in (base.py) all sit behind the small `Proposer` interface in base.py;
`resolve_proposer` turns a command-line spec into one.
"""

import torch

from tevcore.proposer_protocol import Proposer
from tevcore.proposers.base import GreedyRolloutProposer, NoDrafter
from tevcore.proposers.block import (BlockDrafter, BlockDrafterConfig, BlockProposer, default_drafter_path, load_default_proposer,
                    load_drafter, save_drafter)

__all__ = ["Proposer", "resolve_proposer", "PROPOSER_SPECS", "GreedyRolloutProposer", "NoDrafter", "BlockDrafter",
           "BlockDrafterConfig", "BlockProposer", "default_drafter_path", "load_default_proposer", "load_drafter",
           "save_drafter", "DRAFTER_DTYPE_HELP", "parse_drafter_dtype"]


LOOKUP_SUFFIX = "+lookup"
PROPOSER_SPECS = ("'default' (= 'drafter+lookup'), 'drafter', 'rollout', 'lookup' (the lookup without a drafter), "
                  "a drafter folder, 'dflash:<DFlash folder or hub id>', 'model:<hub id or folder>' (a draft LM "
                  "with the target's tokenizer), or any of these + '+lookup'")
DRAFTER_DTYPES = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16}
DRAFTER_DTYPE_HELP = ("dtype a block drafter runs in: 'auto' (bfloat16 on CPUs that run it natively, else its own "
                      "float32), 'float32' or 'bfloat16' (refused on a CPU whose oneDNN cannot pack it); only the drafts change, "
                      "never the verified output's law")


def parse_drafter_dtype(text: str) -> torch.dtype | None:
    """'auto' -> None (the proposer's own choice), else the named dtype."""
    if text not in DRAFTER_DTYPES:
        raise ValueError(f"unknown drafter dtype {text!r}: use one of {', '.join(DRAFTER_DTYPES)}")
    return DRAFTER_DTYPES[text]


def resolve_proposer(spec: str, target, drafter_dtype: torch.dtype | None = None) -> Proposer:
    """A proposer from its spec.

    'drafter' -> the committed drafter (the stand-in if none fits the target);
    'rollout' -> the stand-in; 'dflash:<folder or hub id>' (or a folder whose
    config names DFlashDraftModel) -> a published DFlash drafter;
    'model:<hub id or folder>' -> a draft LM (see draft_lm); anything
    else -> a block drafter folder. A '+lookup'
    suffix mixes in the context lookup; 'default' is 'drafter+lookup' and
    'lookup' the lookup over flat rows (no drafter). `drafter_dtype` is the
    block drafter's (None: `BlockProposer`'s default).
    """
    from pathlib import Path

    from tevcore.proposers.dflash import DFlashProposer
    from tevcore.proposers.dflash_format import PREFIX as DFLASH_PREFIX, is_dflash_folder
    from tevcore.proposers.draft_lm import MODEL_PREFIX, load_draft_lm
    from tevcore.proposers.lookup import ContextLookupProposer

    base = {"default": "drafter" + LOOKUP_SUFFIX, "lookup": "none" + LOOKUP_SUFFIX}.get(spec, spec)
    lookup = base.endswith(LOOKUP_SUFFIX)
    base = base[: -len(LOOKUP_SUFFIX)] if lookup else base
    if base == "drafter":
        proposer = load_default_proposer(target, dtype=drafter_dtype)
    elif base == "rollout":
        proposer = GreedyRolloutProposer()
    elif base == "none" and lookup:
        proposer = NoDrafter(target.vocab_size)
    elif base.startswith(MODEL_PREFIX):
        proposer = load_draft_lm(base[len(MODEL_PREFIX):], target)
    elif base.startswith(DFLASH_PREFIX) or is_dflash_folder(Path(base).expanduser()):
        proposer = DFlashProposer.load(base.removeprefix(DFLASH_PREFIX), target)
    else:
        folder = Path(base).expanduser()
        if not folder.is_dir():
            if folder.exists() or any(mark in base for mark in ("/", "\\", "~")) or base.startswith("."):
                raise FileNotFoundError(f"drafter folder not found: {folder}" + (" (it is a file)" if folder.exists() else ""))
            raise ValueError(f"unknown proposer {spec!r}: use {PROPOSER_SPECS}")
        proposer = BlockProposer(load_drafter(folder, target), name=f"block drafter ({folder})", dtype=drafter_dtype)
    return ContextLookupProposer(proposer) if lookup else proposer
