"""The room's settings, from the environment and an optional small TOML file the host edits.

`TEV_ROOM=1` (what `bash scripts/app.sh --room` sets) switches the room profile on; `TEV_ROOM_CONFIG` names the
host's file; `TEV_ROOM_SECRET` is the host's secret (kept out of the file, so the file can be shared). Without
`TEV_ROOM` the app runs the single-user profile: the same services, generous caps, free paths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tevcore.room.limits import ROOM, SINGLE_USER, Limits

THREADS_PER_COMPUTATION = 1  # torch threads one queued computation uses in the room (TEV_APP_THREADS)
KNOWN_KEYS = {"targets", "drafters", "compute_slots", "space_root", "space_ttl_minutes", "runs", "caps"}


@dataclass(frozen=True)
class RoomSettings:
    """What the host chose: the profile, its caps, the hosted models, where spaces and runs live."""

    room: bool
    limits: Limits
    targets: tuple[str, ...]  # the hosted targets (room: the only ones offered; the first is the default)
    drafters: tuple[str, ...]  # the hosted drafter specs (room: the only ones offered)
    compute_slots: int  # model computations at once
    space_root: Path
    space_ttl_s: float
    runs: Path  # the one runs folder of training and data builds
    host_secret: str | None


def default_slots(cores: int | None, threads: int) -> int:
    """Computations the cores hold: one per `threads` cores, at least one."""
    return max(1, (cores or 1) // max(1, threads))


def _file_settings(path: str | None) -> dict:
    if not path:
        return {}
    try:  # the standard library's TOML reader from Python 3.11; the app itself runs on 3.10 without a room file
        import tomllib
    except ModuleNotFoundError:
        raise ValueError(f"the room config {path} needs Python 3.11 or later (tomllib) to be read") from None
    try:
        values = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"the room config {path} cannot be read: {err}") from None
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"the room config {path} has unknown settings {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(KNOWN_KEYS))}")
    return values


def _names(values: dict, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    names = values.get(key, list(default))
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError(f"room setting {key} must be a non-empty list of names")
    return tuple(n.strip() for n in names)


def load_settings(env: Mapping[str, str] = os.environ) -> RoomSettings:
    """The settings this server runs with; a bad config file is a ValueError naming the file and setting."""
    room = env.get("TEV_ROOM", "").lower() in ("1", "true", "yes")
    values = _file_settings(env.get("TEV_ROOM_CONFIG")) if room else {}
    caps = values.get("caps", {})
    if not isinstance(caps, dict):
        raise ValueError("room setting caps must be a table of cap = number")
    limits = (ROOM if room else SINGLE_USER).with_caps(**caps)
    threads = int(env.get("TEV_APP_THREADS", THREADS_PER_COMPUTATION if room else 0) or 0) or None
    slots = values.get("compute_slots", default_slots(os.cpu_count(), threads or THREADS_PER_COMPUTATION)
                       if room else default_slots(os.cpu_count(), 1))
    if not isinstance(slots, int) or slots < 1:
        raise ValueError(f"room setting compute_slots must be a positive whole number, got {slots!r}")
    ttl = values.get("space_ttl_minutes", 120)
    if not isinstance(ttl, (int, float)) or ttl <= 0:
        raise ValueError(f"room setting space_ttl_minutes must be a positive number, got {ttl!r}")
    default_proposer = env.get("TEV_APP_PROPOSER", "default")
    return RoomSettings(
        room=room, limits=limits,
        targets=_names(values, "targets", (env.get("TEV_APP_TARGET", "default"),)),
        drafters=_names(values, "drafters", (default_proposer,) if default_proposer == "rollout"
                        else (default_proposer, "rollout")),
        compute_slots=slots,
        space_root=Path(values.get("space_root", env.get("TEV_ROOM_SPACES", "/tmp/tev-room-spaces"))),
        space_ttl_s=float(ttl) * 60, runs=Path(values.get("runs", "runs")),
        host_secret=env.get("TEV_ROOM_SECRET") or None)
