"""Which shards of a distillation set are really done: each shard's size and SHA-256, recorded when written.

A shard is written under a temporary name and renamed, so a shard that is
present was complete once; the ledger (`shards.jsonl` beside the shards)
tells whether it still is (a disk error, a truncating copy, an edit). A shard
from before the ledger is checked against its own safetensors header (the
header's data must end where the file ends) and recorded.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tevcore.diskwrite import append_line
from tevcore.filechecks import safetensors_problem, sha256_of

LEDGER = "shards.jsonl"
_TEMPORARY = re.compile(r"^\.shard_\d+\.safetensors\.(\d+)-[0-9a-f]+\.partial$")  # outputs.write_output's name


def record(folder: Path, shard: Path, size: int | None = None) -> None:
    """Add a written shard's size and checksum to the ledger."""
    entry = {"shard": shard.name, "bytes": size if size is not None else shard.stat().st_size,
             "sha256": sha256_of(shard)}
    append_line(Path(folder) / LEDGER, json.dumps(entry))


def recorded(folder: Path) -> dict[str, dict]:
    """The ledger's newest entry per shard; a torn last line (a killed writer) is skipped."""
    path = Path(folder) / LEDGER
    entries: dict[str, dict] = {}
    if not path.is_file():
        return entries
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
            entries[str(entry["shard"])] = {"bytes": int(entry["bytes"]), "sha256": str(entry["sha256"])}
        except (ValueError, KeyError, TypeError):
            continue
    return entries


def shard_problem(folder: Path, shard: Path, ledger: dict[str, dict]) -> str | None:
    """Why a present shard cannot count as done (None when it can); an unrecorded sound shard is recorded."""
    size = shard.stat().st_size
    entry = ledger.get(shard.name)
    if entry is None:
        problem = safetensors_problem(shard)
        if problem is None:
            record(folder, shard, size)
        return problem
    if size != entry["bytes"]:
        return f"{size} bytes where {entry['bytes']} were written"
    if sha256_of(shard) != entry["sha256"]:
        return "its SHA-256 differs from the one recorded when it was written"
    return None


def read_problem(shard: Path, ledger: dict[str, dict]) -> str | None:
    """The check for readers (a training run): the size and SHA-256 recorded when the shard was written (None
    when they match, or when the shard predates the ledger). A byte changed in place keeps the size and
    would otherwise train a drafter on NaN; reading the ledger never writes to it."""
    entry = ledger.get(shard.name)
    if entry is None:
        return None
    size = shard.stat().st_size
    if size != entry["bytes"]:
        return f"{size} bytes where {entry['bytes']} were written"
    if sha256_of(shard) != entry["sha256"]:
        return "its SHA-256 differs from the one recorded when it was written"
    return None


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporary shards of writers that are gone (a killed or crashed build); return them."""
    removed = []
    for path in [*Path(folder).glob("shard_*.tmp"), *Path(folder).glob(".shard_*.partial")]:  # older and newer names
        match = _TEMPORARY.match(path.name)
        if match and _alive(int(match.group(1))):
            continue  # another live build's shard in the making
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process is not writing yet: it is the one starting the build
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
