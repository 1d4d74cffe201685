"""Comma-separated command-line lists (`--budgets 4,8,16`), parsed one way for every command."""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


def comma_list(text: str, parse: Callable[[str], T] = str, what: str = "values") -> list[T]:
    """The items of a comma-separated flag, blanks dropped, each through `parse`.

    An empty list, or an item `parse` rejects with a ValueError, raises a
    ValueError that names the item and what was expected.
    """
    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if not items:
        raise ValueError(f"expected comma-separated {what}, got {text!r}")
    parsed = []
    for item in items:
        try:
            parsed.append(parse(item))
        except ValueError as err:
            detail = f" ({err})" if parse not in (int, float) else ""
            raise ValueError(f"{item!r} in {text!r} is not valid: expected comma-separated {what}{detail}") from None
    return parsed


def budget_or_chain(text: str) -> str | int:
    """One budget of a drafter evaluation: 'chain' (the drafter's top-1 path) or a node budget >= 1."""
    text = text.strip()
    if text == "chain":
        return text
    try:
        budget = int(text)
    except ValueError:
        budget = 0
    if budget < 1:
        raise ValueError("a budget must be an integer >= 1 or 'chain'")
    return budget


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
    from tevcore.target.loading import load_target

    return load_target(spec if spec is not None else args.target, device=device or args.device, dtype=args.dtype)
