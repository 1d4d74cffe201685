"""`python -m tevcore build-data`: build a distillation set for a target."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import torch

from tevcore.flags import add_target_arguments, field_flag, flag_word, seed_value, target_from_args, thread_count
from tevcore.parsing import comma_list
from tevcore.train.data import GREEDY, DataConfig, build_dataset, plan_jobs


THREADS_FLAG = "--threads"
MAX_SHARDS_FLAG = "--max-shards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, help="folder for the shards (resumes when it exists)")
    add_target_arguments(parser)
    parser.add_argument(THREADS_FLAG, type=thread_count, default=1, help="torch CPU threads (1 leaves cores for others)")
    parser.add_argument(MAX_SHARDS_FLAG, type=int, default=None, help="stop after the first N shards of the plan")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    parser.add_argument("--greedy", action="store_true",
                        help="the greedy-regenerated set: the target's own T = 0 response to each training prompt "
                             "only (no teacher-forced text); the flags it sets cannot be given other values")
    for f in fields(DataConfig):
        if f.name == "target":
            continue
        flag = field_flag(f.name)
        if f.type in ("bool", bool):
            parser.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=None)
        elif str(f.type).startswith("tuple"):
            parser.add_argument(flag, default=None, help="comma-separated values")
        else:
            kind = float if f.type in ("float", float) else seed_value if f.name == "seed" else int
            parser.add_argument(flag, type=kind, default=None)


def command_line(out: Path, values: Mapping[str, object], max_shards: int | None = None,
                 threads: int | None = None) -> list[str]:
    """The words after `tevcore build-data` that build `values` (DataConfig fields) into `out`, spelled by the flags
    `add_arguments` declares; a name that is no DataConfig field is a ValueError naming it."""
    unknown = sorted(set(values) - {f.name for f in fields(DataConfig)})
    if unknown:
        raise ValueError(f"build-data has no option for {', '.join(unknown)}")
    words = [str(out)]
    for flag, value in ((MAX_SHARDS_FLAG, max_shards), (THREADS_FLAG, threads),
                        *((field_flag(name), value) for name, value in values.items())):
        if value is not None:
            words += [flag, flag_word(value)]
    return words


def _tuple(kind: str, text: str) -> tuple:
    """A comma-separated flag as the tuple its config field declares (e.g. `tuple[int, ...]`)."""
    parse = {"int": int, "float": float, "str": str}[kind.removeprefix("tuple[").split(",")[0]]
    return tuple(comma_list(text, parse, f"{parse.__name__} values"))


def config_from_args(args: argparse.Namespace) -> DataConfig:
    values = {"target": args.target}
    for f in fields(DataConfig):
        value = getattr(args, f.name, None)
        if f.name == "target" or value is None:
            continue
        values[f.name] = _tuple(str(f.type), value) if str(f.type).startswith("tuple") else value
    if getattr(args, "greedy", False):
        clash = sorted(k for k, v in GREEDY.items() if k in values and values[k] != v)
        if clash:
            flags = ", ".join("--" + k.replace("_", "-") for k in clash)
            raise ValueError(f"--greedy sets {flags} itself; drop them or drop --greedy")
        values.update(GREEDY)
    return DataConfig(**values)


def run(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    config = config_from_args(args)
    target = target_from_args(args, spec=config.target)
    plan = plan_jobs(target, config)[: args.max_shards]
    kinds = [shard[0].kind for shard in plan]
    print(f"plan: {len(plan)} shards ({kinds.count('gen')} generated, {kinds.count('text')} teacher-forced), "
          f"{sum(len(s) for s in plan)} sequences -> {args.out}")
    if args.dry_run:
        return 0
    start = time.time()
    done = build_dataset(target, config, args.out, max_shards=args.max_shards)
    print(f"{done}/{len(plan)} shards in {args.out} ({time.time() - start:.0f} s)")
    return 0
