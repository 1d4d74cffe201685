"""A cached GGUF conversion: whether it is whole, and whether the cache folder can take a new one.

A conversion is written under a temporary name and renamed, with a record
(`tevcore-converted.json`: the weights' size, time stamp and SHA-256) written
last. A later load checks the files a load needs (config, tokenizer, the
weights' header against their size) and, when the weights' size or time stamp
moved, their SHA-256 against the record, so damaged weights are converted
again instead of failing inside safetensors or loading as another model (whose
drafters would then be refused as "trained for another target").
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tevcore.diskwrite import write_text_atomic
from tevcore.filechecks import safetensors_problem, sha256_of

CACHE_SETTING = "TEVCORE_CACHE"
RECORD = "tevcore-converted.json"
WEIGHTS = "model.safetensors"
TOKENIZER_FILES = (("tokenizer_config.json",), ("tokenizer.json", "tokenizer.model"))  # each: one of these


def cache_unwritable(folder: Path) -> str | None:
    """Why a conversion cannot be written in `folder` (None when it can), found by trying, not by permission bits."""
    existing = Path(folder)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        return f"{folder} is not writable ({err.strerror or err})"
    return None


def conversion_unreadable(folder: Path) -> str | None:
    """Why this user cannot read a cached conversion that is there (None when it can), found by trying.

    Another user's healthy cache (a folder of mode 0700) is not damaged: it is
    only not this user's to read, and converting "again" could not replace it.
    """
    try:
        os.listdir(folder)
        with open(Path(folder) / "config.json", "rb"):
            pass
    except PermissionError as err:
        return f"{folder} cannot be read by this user ({err.strerror or err})"
    except OSError:
        return None  # a missing file is damage, which `converted_problem` names
    return None


def _json_object(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def record_conversion(folder: Path) -> None:
    """Write the record of a finished conversion in `folder` (its weights' size, time stamp and SHA-256)."""
    weights = Path(folder) / WEIGHTS
    stat = weights.stat()
    record = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256_of(weights)}
    write_text_atomic(Path(folder) / RECORD, json.dumps(record))


def converted_problem(folder: Path) -> str | None:
    """Why a cached conversion cannot be loaded as it is (None when it can).

    A conversion from before records were kept is checked by its files and
    headers and, when sound, recorded (where the cache can be written).
    """
    folder = Path(folder)
    config = _json_object(folder / "config.json")
    if config is None or "model_type" not in config:
        return "config.json is missing or is not a model config"
    for choices in TOKENIZER_FILES:
        if not any((folder / name).is_file() for name in choices):
            return f"the tokenizer file {' or '.join(choices)} is missing"
    if _json_object(folder / "tokenizer_config.json") is None:
        return "tokenizer_config.json is not a JSON object"
    weights = folder / WEIGHTS
    if not weights.is_file():
        return f"{WEIGHTS} is missing"
    problem = safetensors_problem(weights)
    if problem is not None:
        return f"{WEIGHTS} is {problem}"
    record, stat = _json_object(folder / RECORD), weights.stat()
    if record is not None and (record.get("bytes"), record.get("mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
        return None
    if record is not None and sha256_of(weights) != record.get("sha256"):
        return f"{WEIGHTS} is not the file the conversion wrote (its SHA-256 differs)"
    if os.access(folder, os.W_OK):
        try:
            record_conversion(folder)  # a sound older conversion, or the same bytes touched: recorded as they are
        except OSError:
            pass
    return None
