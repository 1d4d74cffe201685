"""The target flags (`--target`, `--device`, `--dtype`), the same on every command that loads a target."""

from __future__ import annotations

from tevcore.target.loading import load_target

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
