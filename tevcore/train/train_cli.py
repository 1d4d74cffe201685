"""`python -m tevcore train`: train a drafter of any trainable kind (distillation or ExitTrain) into a run folder.

Runs unchanged under `torchrun --nproc-per-node N -m tevcore -- train ...` (DDP; gloo on CPU, NCCL on GPU).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import torch

from tevcore.flags import add_target_arguments, field_flag, flag_word, seed_value, target_from_args, thread_count
from tevcore.proposers import block_training
from tevcore.proposers.block import read_config
from tevcore.proposers.block_training import drafter_folder
from tevcore.proposers.registry import trainable_specs, trainer_for
from tevcore.ranks import device_for_rank, is_first
from tevcore.train.config import TrainConfig


CONFIG_FLAG = "--config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, help="run folder (resumes when it holds a checkpoint)")
    parser.add_argument(CONFIG_FLAG, type=Path, default=None, help="JSON training config; flags override it")
    add_target_arguments(parser, target_default=None)  # None: the config's target (TrainConfig.target)
    parser.add_argument("--dry-run", action="store_true", help="print the validated config and plan, then exit")
    parser.add_argument("--export", type=Path, default=None, help="also write an fp16 copy of the final drafter here")
    for f in fields(TrainConfig):
        if f.name == "target":  # `--target`, declared with the other target flags
            continue
        flag = field_flag(f.name)
        kind = {"int": int, "float": float, "int | None": int, "str | None": str, "bool": _true_or_false}.get(
            str(f.type), str)
        kind = {"seed": seed_value, "threads": thread_count}.get(f.name, kind)
        helps = {"init": f"the drafter to start from: {trainable_specs()} (default: a fresh block drafter)"}
        parser.add_argument(flag, type=kind, default=None, help=helps.get(f.name, f"TrainConfig.{f.name}"))


def command_line(out: Path, values: Mapping[str, object], config: Path | None = None) -> list[str]:
    """The words after `tevcore train` that train `values` (TrainConfig fields; None leaves a field to the config
    and its default) into `out`, spelled by the flags `add_arguments` declares; a name that is no TrainConfig
    field is a ValueError naming it."""
    unknown = sorted(set(values) - {f.name for f in fields(TrainConfig)})
    if unknown:
        raise ValueError(f"the train CLI has no option for {', '.join(unknown)}")
    words = [str(out), *([CONFIG_FLAG, str(config)] if config is not None else [])]
    for name, value in values.items():
        if value is not None:
            words += [field_flag(name), flag_word(value)]
    return words


def _true_or_false(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1", "yes")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    values = {}
    if args.config:
        try:
            values = json.loads(args.config.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise ValueError(f"--config {args.config} is not valid JSON: {err}") from None
        if not isinstance(values, dict):
            raise ValueError(f"--config {args.config} must hold a JSON object of TrainConfig fields")
    values.update({f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name) is not None})
    return TrainConfig.from_dict(values)


def _check_init(config: TrainConfig, manifest: dict) -> None:
    """A block drafter to start from must fit the run: its depth and context, and the data's hidden layers
    (other kinds check their own shape when their trainer loads them)."""
    kind, _, source = trainer_for(config.init)
    if source is None or kind is not block_training.KIND:
        return
    shape = read_config(drafter_folder(source))
    layers = tuple(manifest.get("config", {}).get("hidden_layers") or ())
    if (shape.depth, shape.context) != (config.depth, config.context) or tuple(shape.hidden_layers) != layers:
        raise ValueError(f"--init {config.init} has depth {shape.depth}, context {shape.context} and hidden layers "
                         f"{list(shape.hidden_layers)}; this run has depth {config.depth}, context {config.context} "
                         f"and data with hidden layers {list(layers)}")


def config_plan(config: TrainConfig) -> str:
    """What a dry run prints for `config`: its plan and the validated config (a ValueError when its data or its
    drafter to start from do not fit); a server takes it as a value (`tevcore.room.training.plan`)."""
    from tevcore.train.data import read_manifests

    manifests = read_manifests(config.data)
    _check_init(config, manifests[0])
    kind = f"ExitTrain (lambda={config.tree_lambda}, w={config.tree_weight}, B={config.tree_budget}, " \
        f"norm={config.tree_norm})" if config.exit_train else "distillation only"
    start = f"from {config.init}" if config.init else "from a new drafter (random weights)"
    return (f"{kind}: {config.steps} steps x {config.batch_size} anchors"
            f"{f' + {config.tree_anchors} tree anchors' if config.tree_anchors else ''}"
            f"{f' ({config.tree_anchor_count} of them with trees)' if config.tree_share else ''}, "
            f"{config.anchor_loss} anchor loss, {start}; data {config.data} "
            f"({sum(m['shards'] for m in manifests)} shards planned, target {manifests[0]['target_name']})\n"
            + "".join(f"warning: {text}\n" for text in config.warnings())
            + json.dumps(config.to_dict(), indent=2))


STOPPED = 130  # the exit status of a run stopped by the user (Ctrl-C or SIGTERM), as a shell reports SIGINT


def _stop_on_sigterm(signum: int, frame: object) -> None:
    """A stop signal (the app's Stop button, `kill`) ends the run as Ctrl-C does: status "interrupted", resumable."""
    raise KeyboardInterrupt


def stop_line(folder: Path, total: int) -> str:
    """What a stopped run says: the steps done, and the step the same command goes on from (its last checkpoint's,
    which is earlier when the stop came between two checkpoints: those steps run again)."""
    from tevcore.train.rundir import checkpoint_step, done_steps

    done, resume = done_steps(folder), checkpoint_step(folder)
    if resume >= done:
        return f"stopped after step {done} of {total}; the same command resumes it"
    kept = f"its last checkpoint, step {resume}" if resume else "step 0: no checkpoint was saved yet"
    return f"stopped after step {done} of {total}; the same command resumes it from {kept}"


def run(args: argparse.Namespace) -> int:
    from tevcore.train.how_made import HOW_MADE
    from tevcore.train.loop import train

    config = config_from_args(args)
    print(config_plan(config))
    if args.dry_run:
        return 0
    torch.set_num_threads(config.threads)
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        target = target_from_args(args, spec=config.target, device=device_for_rank(args.device))
        final = train(config, args.out, target)
    except KeyboardInterrupt:
        print(stop_line(args.out, config.steps))
        return STOPPED
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.export and is_first():
        trainer_for(config.init)[1].load(final, config, target).save(args.export, dtype=torch.float16)
        shutil.copyfile(final / HOW_MADE, args.export / HOW_MADE)
        print(f"exported fp16 drafter to {args.export}")
    return 0
