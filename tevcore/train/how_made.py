"""A trained drafter's record of how it was made: from what start, on data of which kinds.

`how_made.json` goes beside the files of every checkpoint and of the final drafter a run writes (and of its
`--export` copy), so the drafter itself answers "did it ever see a response the target generated?" without its
run folder. The kinds are read from the shards the run really trained on (each shard's own header: "gen" for
the target's responses, "text" for teacher-forced text), not from what a set's manifest planned, since a run
limited by `--max-shards` may never reach a set's generated shards. The start's own record, where it has one,
is carried inside, so `saw_generated_responses` covers the whole lineage: true when this run or any earlier
one trained on a generated response, false only when every run back to a fresh drafter is known to have seen
none, and null when the start's history is unrecorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from tevcore.proposers import block_training
from tevcore.proposers.block_training import drafter_folder
from tevcore.proposers.registry import trainer_for
from tevcore.train.anchors import AnchorSet
from tevcore.train.config import TrainConfig
from tevcore.train.data import read_manifest, shard_kind

HOW_MADE = "how_made.json"
GENERATED = "gen"


def data_record(anchors: AnchorSet) -> dict[str, dict]:
    """Per set folder (in the order the run joined them): the shards it used, by kind, with their sequences and
    stored tokens, and the config the set was built with."""
    record: dict[str, dict] = {}
    for path, shard in zip(anchors.paths, anchors.shards):
        folder = record.setdefault(str(path.parent), {"kinds": {}, "config": read_manifest(path.parent)["config"]})
        counts = folder["kinds"].setdefault(shard_kind(path), {"shards": 0, "sequences": 0, "stored_tokens": 0})
        counts["shards"] += 1
        counts["sequences"] += len(shard["starts"])
        counts["stored_tokens"] += int(shard["tokens"].numel())
    return record


def start_record(init: str | None) -> dict | None:
    """The starting drafter's own how_made.json (None for a fresh drafter or a start without one)."""
    if init is None:
        return None
    kind, _, source = trainer_for(init)
    folder = drafter_folder(source) if kind is block_training.KIND else Path(source)
    try:
        record = json.loads((folder / HOW_MADE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def lineage_saw_generated(kinds: set[str], init: str | None, start: dict | None) -> bool | None:
    """Whether this drafter or any drafter it was fine-tuned from trained on a generated response (None: unknown)."""
    earlier = False if init is None else (start or {}).get("saw_generated_responses")
    if GENERATED in kinds or earlier is True:
        return True
    if "unknown" in kinds or earlier is not False:
        return None
    return False


def how_made(config: TrainConfig, anchors: AnchorSet) -> dict:
    """The record a run writes beside its drafters (the data this process trained on; a resumed run's earlier
    processes read a prefix of the same shards)."""
    data = data_record(anchors)
    kinds = {kind for folder in data.values() for kind in folder["kinds"]}
    start = start_record(config.init)
    return {"made_by": "tevcore train", "start": config.init or "a new drafter (random weights)",
            "kinds_seen": sorted(kinds), "saw_generated_responses": lineage_saw_generated(kinds, config.init, start),
            "data": data, "train_config": config.to_dict(), "start_how_made": start}
