"""The proposer flags (`--proposer`, `--drafter-dtype`, `--branches`), declared once for every command that loads
a proposer, and the one way a command turns them into a proposer."""

from __future__ import annotations

import argparse

from tevcore.flags import int_at_least
from tevcore.proposer_protocol import Proposer
from tevcore.proposers import DRAFTER_DTYPE_HELP, parse_drafter_dtype
from tevcore.proposers.kind import LoadOptions
from tevcore.proposers.registry import proposer_specs, resolve_proposer
from tevcore.target.loading import Target

BRANCHES_HELP = ("depth-1 tokens given a second, conditioned drafter pass (block drafters trained with a known "
                 "slot; default 2 for those, 0 otherwise)")


def branch_count(text: str) -> int:
    """--branches: an integer >= 0, refused here rather than after a drafter has loaded."""
    return int_at_least(0, text)


def add_proposer_arguments(parser: argparse.ArgumentParser, spec: bool = True, spec_help: str = "") -> None:
    """The proposer flag group; `spec=False` for a command that names its drafter otherwise (a positional
    drafter, `--init`) and takes only the load options."""
    if spec:
        parser.add_argument("--proposer", default="default", help=proposer_specs() + spec_help)
    parser.add_argument("--drafter-dtype", default="auto", help=DRAFTER_DTYPE_HELP)
    parser.add_argument("--branches", type=branch_count, default=None, help=BRANCHES_HELP)


def proposer_options(args: argparse.Namespace, name: str | None = None) -> LoadOptions:
    """The load options the flags give, checked before any model loads."""
    return LoadOptions(parse_drafter_dtype(args.drafter_dtype), args.branches, name)


def proposer_from_args(args: argparse.Namespace, target: Target, options: LoadOptions | None = None,
                       spec: str | None = None) -> Proposer:
    """The proposer the flags name (`spec` overrides `--proposer`), loaded against `target`."""
    options = options or proposer_options(args)
    return resolve_proposer(spec if spec is not None else args.proposer, target, options.drafter_dtype,
                            options.branches, name=options.name)
