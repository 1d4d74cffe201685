"""Proposers: given the committed context, propose per-depth draft rows for the tree builder.

The block drafter (block.py: one pass gives K per-depth distributions, trained
with ExitTrain), a published DFlash drafter (dflash.py), a draft LM
(draft_lm.py: grows its own tree), the context lookup (lookup.py) and the
greedy rollout stand-in (base.py) all sit behind the small `Proposer`
interface in base.py. Each is a drafter kind (kind.py) listed once in
registry.py, whose `resolve_proposer` is the one parser of proposer specs;
the trainable kinds (block_training.py, dflash_training.py) also tell the one
training loop how to train them. flags.py declares the proposer flags once
for every command that loads a proposer.
"""

import torch

from tevcore.proposer_protocol import Proposer
from tevcore.proposers.base import GreedyRolloutProposer, NoDrafter
from tevcore.proposers.block import (BlockDrafter, BlockDrafterConfig, BlockProposer, default_drafter_path, load_default_proposer,
                    load_drafter, save_drafter)
from tevcore.proposers.registry import proposer_specs, resolve_proposer

__all__ = ["Proposer", "resolve_proposer", "proposer_specs", "GreedyRolloutProposer", "NoDrafter", "BlockDrafter",
           "BlockDrafterConfig", "BlockProposer", "default_drafter_path", "load_default_proposer", "load_drafter",
           "save_drafter", "DRAFTER_DTYPE_HELP", "parse_drafter_dtype"]


DRAFTER_DTYPES = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16}
DRAFTER_DTYPE_HELP = ("dtype a block drafter runs in: 'auto' (bfloat16 on CPUs that run it natively, else its own "
                      "float32), 'float32' or 'bfloat16' (refused on a CPU whose oneDNN cannot pack it); only the drafts change, "
                      "never the verified output's law")


def parse_drafter_dtype(text: str) -> torch.dtype | None:
    """'auto' -> None (the proposer's own choice), else the named dtype."""
    if text not in DRAFTER_DTYPES:
        raise ValueError(f"unknown drafter dtype {text!r}: use one of {', '.join(DRAFTER_DTYPES)}")
    return DRAFTER_DTYPES[text]
