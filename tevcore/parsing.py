"""Plain text parsers shared by every command and spec: comma-separated lists, one evaluation budget, a whole
number from an environment variable.

They sit below every other module so that the engine can parse a builder spec
(`width:4,2`) the way the command line parses `--budgets 4,8,16`.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def env_whole(env: Mapping[str, str], name: str, default: int | None, minimum: int = 1) -> int | None:
    """The environment variable `name` as a whole number >= `minimum` (`default` when unset or empty); anything
    else is a ValueError naming the variable."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"the environment variable {name} must be a whole number >= {minimum}, got {text!r}")
    return value
