"""The target flags (`--target`, `--device`, `--dtype`), the same on every command that loads a target."""

from __future__ import annotations

import argparse
import os

from tevcore.engine.sampling import MAX_SEED
from tevcore.target.loading import check_text, load_target


def int_at_least(minimum: int, text: str) -> int:
    """An integer flag's value, refused by argparse in one line below `minimum`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
    return value


def count_at_least_one(text: str) -> int:
    """A count of things to do (prompts, rounds, tokens): an integer >= 1, so a run never does no work."""
    return int_at_least(1, text)


def seed_value(text: str) -> int:
    """A seed: an integer in [0, MAX_SEED], refused here rather than by torch after the model has loaded."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed must lie in [0, {MAX_SEED}] (2^32 - 1), got {value}")
    return value


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        return os.cpu_count() or 1


def thread_count(text: str) -> int:
    """torch CPU threads: 1 up to the cores this process may use (more only slows every thread down)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of threads, got {text!r}") from None
    cores = usable_cores()
    if not 1 <= value <= cores:
        raise argparse.ArgumentTypeError(f"must lie in [1, {cores}] (the CPU cores this process may use), got {value}")
    return value


def prompt_text(text: str) -> str:
    """A prompt given on the command line: text the tokenizer can take (see `check_text`)."""
    try:
        return check_text(text, "the prompt")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


TARGET_HELP = "'default' (the embedded SmolLM2-135M), a .gguf file, a Hugging Face model folder or a hub id"
DEVICE_HELP = "auto (CUDA when present, else CPU), cpu, cuda or cuda:N"
DTYPE_HELP = "auto (bfloat16 on CUDA, float32 on CPU), float32, bfloat16 or float16"


def add_target_arguments(parser, target_default: str | None = "default") -> None:
    """`--target`, `--device` and `--dtype`, the same on every command that loads a target."""
    parser.add_argument("--target", default=target_default, help=TARGET_HELP)
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--dtype", default="auto", help=DTYPE_HELP)


def target_from_args(args, spec: str | None = None, device: str | None = None):
    """The target the flags of `add_target_arguments` name (`spec`/`device` override theirs)."""
    return load_target(spec if spec is not None else args.target, device=device or args.device, dtype=args.dtype)


def field_flag(name: str) -> str:
    """The flag of a config field (`tree_lambda` -> `--tree-lambda`): the one spelling a command's parser declares
    and its command-line writer writes, so the two cannot drift apart."""
    return "--" + name.replace("_", "-")


def flag_word(value: object) -> str:
    """A config value as its flag's parser reads it back: booleans as true/false, tuples comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(flag_word(item) for item in value)
    return str(value)
