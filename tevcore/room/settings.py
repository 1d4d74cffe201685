"""The room's settings, from the environment and an optional small TOML file the host edits.

`TEV_ROOM=1` (what `bash scripts/app.sh --room` sets) switches the room profile on; `TEV_ROOM_CONFIG` names the
host's file; `TEV_ROOM_SECRET` is the host's secret (kept out of the file, so the file can be shared). Without
`TEV_ROOM` the app runs the single-user profile: the same services, generous caps, free paths.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tevcore.parsing import env_whole
from tevcore.room.limits import ROOM, SINGLE_USER, Limits
from tevcore.room.spaces import space_root_problem

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


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_whole(values: dict, key: str, default: int) -> int:
    value = values.get(key, default)
    if not _whole(value) or value < 1:
        raise ValueError(f"room setting {key} must be a positive whole number, got {value!r}")
    return value


def _positive_number(values: dict, key: str, default: float) -> float:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"room setting {key} must be a positive finite number, got {value!r}")
    return float(value)


def _folder(values: dict, key: str, default: str) -> Path:
    value = values.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"room setting {key} must be a folder path (a quoted string), got {value!r}")
    return Path(value).expanduser()


def load_settings(env: Mapping[str, str] = os.environ) -> RoomSettings:
    """The settings this server runs with; a bad config file is a ValueError naming the file and setting, a bad
    environment variable one naming the variable, and a space root that could hold anything but the room's own
    (`spaces.space_root_problem`) one saying why."""
    room = env.get("TEV_ROOM", "").lower() in ("1", "true", "yes")
    values = _file_settings(env.get("TEV_ROOM_CONFIG")) if room else {}
    caps = values.get("caps", {})
    if not isinstance(caps, dict):
        raise ValueError("room setting caps must be a table of cap = number")
    limits = (ROOM if room else SINGLE_USER).with_caps(**caps)
    threads = env_whole(env, "TEV_APP_THREADS", THREADS_PER_COMPUTATION if room else None)
    slots = _positive_whole(values, "compute_slots", default_slots(os.cpu_count(), threads or THREADS_PER_COMPUTATION)
                            if room else default_slots(os.cpu_count(), 1))
    ttl = _positive_number(values, "space_ttl_minutes", 120)
    space_root = _folder(values, "space_root", env.get("TEV_ROOM_SPACES") or "/tmp/tev-room-spaces")
    runs = _folder(values, "runs", "runs")
    default_proposer = env.get("TEV_APP_PROPOSER", "default")
    targets = _names(values, "targets", (env.get("TEV_APP_TARGET", "default"),))
    drafters = _names(values, "drafters", (default_proposer,) if default_proposer == "rollout"
                      else (default_proposer, "rollout"))
    if room:  # last: every setting is well formed, so this line is about the folder only
        problem = space_root_problem(space_root, runs)
        if problem:
            raise ValueError(problem)
    return RoomSettings(room=room, limits=limits, targets=targets, drafters=drafters, compute_slots=slots,
                        space_root=space_root, space_ttl_s=ttl * 60, runs=runs,
                        host_secret=env.get("TEV_ROOM_SECRET") or None)


def check_device_setting(env: Mapping[str, str]) -> None:
    """TEV_APP_DEVICE, when set, names a device this machine has (a ValueError naming the variable)."""
    device = env.get("TEV_APP_DEVICE", "").strip()
    if device:
        from tevcore.target.devices import pick_device

        try:
            pick_device(device)
        except ValueError as err:
            raise ValueError(f"the environment variable TEV_APP_DEVICE: {err}") from None


def summary(settings: RoomSettings) -> str:
    """The line `scripts/app.sh --room` prints before the server starts."""
    return (f"room: targets {list(settings.targets)}, drafters {list(settings.drafters)}, {settings.compute_slots} "
            f"computation(s) at once, spaces in {settings.space_root}")


def main(env: Mapping[str, str] = os.environ) -> int:
    """`python -m tevcore.room.settings`: check the settings before the server starts (scripts/app.sh): 0 (and
    in a room its summary line), or one line naming what is wrong and 2."""
    try:
        settings = load_settings(env)
        for name in ("TEV_ROOM_PORT", "TEV_ROOM_UPLOAD_MB"):  # read by streamlit, checked here first
            env_whole(env, name, None)
        check_device_setting(env)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if settings.room:
        print(summary(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
