"""Distillation data: target features and top-k next-token distributions, in safetensors shards.

Each shard is one batch of sequences run through the frozen target: either
responses the target generates itself (what the drafter will see at
inference) or teacher-forced text (cheap: one batched forward per shard).
For every stored position i it keeps the token, the hidden states of the
feature layers, and the top-k of log p(.|tokens[:i+1]) at T = 1. Sequences
keep only the `context` positions before the first draft root, since the
drafter reads no further back. Shards are written atomically and skipped
when present, so an interrupted build resumes; everything is seeded.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from tqdm import tqdm

from tevcore.diskwrite import save_tensors, write_text_atomic
from tevcore.outputs import write_failure
from tevcore.engine.sampling import make_generator
from tevcore.lab.datasets import DATASETS
from tevcore.parsing import comma_list
from tevcore.proposers.block_config import feature_layers_for
from tevcore.proposers.target_record import target_fingerprint
from tevcore.target.loading import Target, encode_prompt
from tevcore.train import shard_ledger
from tevcore.train.generation import features_forward, generate_sequences, top_k_rows
from tevcore.train.prompts import all_training_prompts
from tevcore.train.rundir import RunLock

MANIFEST = "manifest.json"
MANIFEST_KEYS = ("target_name", "shards")


@dataclass(frozen=True)
class DataConfig:
    """What a distillation set holds; stored in the manifest so a resume cannot mix settings."""

    target: str = "default"
    hidden_layers: tuple[int, ...] | None = None  # target layers to record; None: `feature_layers_for` the target
    context: int = 8  # feature positions kept before the first root
    top_k: int = 32
    seed: int = 0
    generate: bool = True  # self-generated responses to the training prompts
    sets: tuple[str, ...] = ()  # prompt sets to draw training prompts from; empty for all
    samples: int = 1  # generated responses per prompt
    temperatures: tuple[float, ...] = (0.0, 1.0)  # cycled over the responses, in plan order
    max_new_tokens: int = 192
    gen_batch: int = 16
    max_prompt_tokens: int = 448
    text_pairs: bool = True  # teacher-forced reference answers (GSM8K, HumanEval)
    python_files: int = 40  # teacher-forced Python source files (stdlib), 0 for none
    text_window: int = 384
    text_batch: int = 8

    def __post_init__(self) -> None:
        if self.hidden_layers == () or self.context < 1 or self.top_k < 1 or self.gen_batch < 1 or self.text_batch < 1:
            raise ValueError("hidden_layers, context, top_k and batch sizes must be positive")
        if self.samples < 1 or not self.temperatures:
            raise ValueError("samples must be at least 1 and temperatures must name at least one value")
        if not all(math.isfinite(t) and t >= 0 for t in self.temperatures):
            raise ValueError(f"temperatures must be finite and >= 0, got {self.temperatures}")
        unknown = set(self.sets) - set(DATASETS)
        if unknown:
            raise ValueError(f"unknown prompt sets {sorted(unknown)}; choose from {DATASETS}")


GREEDY = {"generate": True, "samples": 1, "temperatures": (0.0,), "text_pairs": False, "python_files": 0}
"""The greedy-regenerated set (`build-data --greedy`): the target's own T = 0 response to each training prompt,
nothing teacher-forced, as the public TEV recipe trains on; its rows are still the target's full top-k."""


@dataclass(frozen=True)
class Job:
    """One sequence to run: generate after `ids` (kind 'gen'), or teacher-force `ids` (kind 'text')."""

    kind: str
    ids: tuple[int, ...]
    start: int  # index of the first draft root (the last prompt token)
    temperature: float = 0.0


def _python_texts(count: int, seed: int) -> list[str]:
    files = sorted(Path(os.__file__).parent.glob("*.py"))
    random.Random(seed).shuffle(files)
    return [f.read_text(errors="replace") for f in files[:count]]


def generation_jobs(prompts: list[list[int]], config: DataConfig) -> list[Job]:
    """`samples` responses per prompt that fits, temperatures cycling over them in order."""
    jobs = []
    for i, ids in enumerate(prompts):
        if len(ids) > config.max_prompt_tokens:
            continue
        for s in range(config.samples):
            temperature = config.temperatures[(i * config.samples + s) % len(config.temperatures)]
            jobs.append(Job("gen", tuple(ids), len(ids) - 1, temperature=float(temperature)))
    return jobs


def for_target(target: Target, config: DataConfig) -> DataConfig:
    """`config` with its feature layers for `target` (the default spread when it names none), checked to exist
    in the target (hidden-state index 0 is the embedding output)."""
    if config.hidden_layers is None:
        return replace(config, hidden_layers=feature_layers_for(target))
    depth = int(target.model.config.num_hidden_layers)
    if max(config.hidden_layers) > depth or min(config.hidden_layers) < 0:
        spread = ",".join(map(str, feature_layers_for(target)))
        raise ValueError(f"hidden layers {list(config.hidden_layers)} do not lie in 0..{depth} (the target "
                         f"{target.name} has {depth} layers); pass e.g. --hidden-layers {spread}")
    return config


def plan_jobs(target: Target, config: DataConfig) -> list[list[Job]]:
    """The deterministic list of shards (each a list of jobs) for a target and config."""
    config = for_target(target, config)
    rng = random.Random(config.seed)
    items = all_training_prompts(config.sets or None)
    shards: list[list[Job]] = []
    if config.generate:
        gen = generation_jobs([encode_prompt(target, item.text) for item in items], config)
        rng.shuffle(gen)
        window = config.gen_batch * 8  # sort by length inside windows: less padding, still mixed
        for w in range(0, len(gen), window):
            part = sorted(gen[w:w + window], key=lambda j: len(j.ids))
            shards += [part[b:b + config.gen_batch] for b in range(0, len(part), config.gen_batch)]
    text = []
    if config.text_pairs:
        for item in items:
            if isinstance(item.reference, str) and item.reference.strip():  # some sets give lists
                prompt = encode_prompt(target, item.text)
                full = encode_prompt(target, item.text, reply=item.reference)
                if len(full) <= config.max_prompt_tokens + config.max_new_tokens:
                    text.append(Job("text", tuple(full), len(prompt) - 1))
    for source in _python_texts(config.python_files, config.seed):
        ids = target.tokenizer(source)["input_ids"]
        step = config.text_window
        text += [Job("text", tuple(ids[s:s + step]), 0) for s in range(0, len(ids) - 32, step)]
    rng.shuffle(text)
    shards += [text[b:b + config.text_batch] for b in range(0, len(text), config.text_batch)]
    order = list(range(len(shards)))
    rng.shuffle(order)  # any finished prefix of the shards is a balanced mix
    return [shards[i] for i in order]


@torch.inference_mode()
def _run_text(target: Target, jobs: list[Job], config: DataConfig) -> list[dict[str, torch.Tensor]]:
    """Teacher-forced features of right-padded sequences in one forward."""
    model, dev = target.model, target.device
    width = max(len(j.ids) for j in jobs)
    ids = torch.zeros(len(jobs), width, dtype=torch.long)
    mask = torch.zeros(len(jobs), width, dtype=torch.long)
    for b, job in enumerate(jobs):
        ids[b, :len(job.ids)] = torch.tensor(job.ids)
        mask[b, :len(job.ids)] = 1
    last, hidden = features_forward(model, config.hidden_layers, input_ids=ids.to(dev), attention_mask=mask.to(dev))
    out = []
    for b, job in enumerate(jobs):
        first = max(0, job.start - config.context)
        end = len(job.ids)
        top_ids, top_logp = top_k_rows(model.lm_head(last[b, first:end]), config.top_k)
        out.append({"tokens": ids[b, first:end], "hidden": hidden[b, first:end], "top_ids": top_ids,
                    "top_logp": top_logp, "start": torch.tensor(job.start - first),
                    "prefix": ids[b, :first]})
    return out


def _pack(seqs: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Concatenate sequences; `prefix` holds the tokens before each stored part (for target re-runs)."""
    lengths = torch.tensor([len(s["tokens"]) for s in seqs])
    prefix_lengths = torch.tensor([len(s["prefix"]) for s in seqs])
    return {
        "prefix": torch.cat([s["prefix"] for s in seqs]).int(),
        "prefix_offsets": torch.cat([torch.zeros(1, dtype=torch.long), prefix_lengths.cumsum(0)]),
        "tokens": torch.cat([s["tokens"] for s in seqs]).int(),
        "hidden": torch.cat([s["hidden"] for s in seqs]).half().contiguous(),
        "top_ids": torch.cat([s["top_ids"] for s in seqs]).int(),
        "top_logp": torch.cat([s["top_logp"] for s in seqs]).half(),
        "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
        "starts": torch.stack([s["start"] for s in seqs]).long(),
    }


def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard_{index:05d}.safetensors"


def _check_manifest(folder: Path, target: Target, config: DataConfig, shards: int) -> None:
    """Write the manifest, or refuse to resume a folder built with other settings.

    A damaged manifest beside no shards (a build killed while writing it) is simply written again; beside
    shards it is refused, since they may have been built with other settings.
    """
    config_dict = json.loads(json.dumps(asdict(config)))  # tuples as lists, as the file holds them
    defaults = json.loads(json.dumps(asdict(DataConfig())))  # a field newer than the folder had its default
    path = folder / MANIFEST
    if path.is_file():
        try:
            old = read_manifest(folder)
        except ValueError as err:
            if any(folder.glob("shard_*.safetensors")):
                raise ValueError(f"{err}; restore it, or build into a new folder") from None
            old = None
        if old is not None and {**defaults, **old.get("config", {})} != config_dict:
            raise ValueError(f"{folder} was built with another config; use a new folder or the same settings")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_failure(folder, err) from None
    manifest = {"config": config_dict, "target_name": target.name, "vocab_size": target.vocab_size,
                "hidden_size": int(target.model.config.hidden_size), "target_fingerprint": target_fingerprint(target),
                "shards": shards}
    write_text_atomic(path, json.dumps(manifest, indent=2))


def _done_shards(folder: Path, count: int) -> set[int]:
    """The shards of the plan that are present and sound; a damaged one is deleted (and said) to be built again."""
    ledger = shard_ledger.recorded(folder)
    done = set()
    for index in range(count):
        path = shard_path(folder, index)
        if not path.is_file():
            continue
        problem = shard_ledger.shard_problem(folder, path, ledger)
        if problem is None:
            done.add(index)
        else:
            print(f"note: shard {path} is damaged ({problem}); building it again", file=sys.stderr)
            path.unlink()
    return done


def build_dataset(target: Target, config: DataConfig, folder: Path, max_shards: int | None = None,
                  plan: list[list[Job]] | None = None) -> int:
    """Write the missing shards of the plan (default: `plan_jobs`) into `folder`; return how many exist."""
    folder = Path(folder)
    config = for_target(target, config)
    plan = plan_jobs(target, config) if plan is None else plan
    if max_shards is not None:
        plan = plan[:max_shards]
    with held_data_folder(folder):
        return _build_shards(target, config, folder, plan)


@contextmanager
def held_data_folder(folder: Path) -> Iterator[Path]:
    """The data folder, made and locked for one build (`rundir.RunLock`): a second build into it is refused in one
    line instead of building every shard again beside the first; a folder this build made and left empty goes."""
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_failure(folder, err) from None
    lock = RunLock(folder, "data build")
    try:
        lock.acquire()
        yield folder
    finally:
        lock.release()
        if made and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _build_shards(target: Target, config: DataConfig, folder: Path, plan: list[list[Job]]) -> int:
    """The missing shards of `plan` written into the locked `folder`; how many exist."""
    _check_manifest(folder, target, config, len(plan))
    shard_ledger.remove_stale_temporaries(folder)
    done = _done_shards(folder, len(plan))
    todo = [i for i in range(len(plan)) if i not in done]
    tokens = 0
    bar = tqdm(todo, desc="shards", unit="shard")
    for index in bar:
        jobs = plan[index]
        if jobs[0].kind == "gen":
            seqs = generate_sequences(target, [j.ids for j in jobs], [j.temperature for j in jobs],
                                      config.max_new_tokens, config.hidden_layers, config.context, config.top_k,
                                      make_generator(config.seed * 100003 + index))
        else:
            seqs = _run_text(target, jobs, config)
        packed = _pack(seqs)
        size = save_tensors(shard_path(folder, index), packed, metadata={"kind": jobs[0].kind})
        shard_ledger.record(folder, shard_path(folder, index), size)
        tokens += int(packed["tokens"].numel())
        bar.set_postfix(tokens=tokens)
    return sum(shard_path(folder, i).is_file() for i in range(len(plan)))


def shard_files(folder: Path) -> list[Path]:
    """The finished shard files of a set, in index order (the order `load_shards` returns them in)."""
    paths = sorted(Path(folder).glob("shard_*.safetensors"))
    if not paths:
        raise FileNotFoundError(f"no shards in {folder}; build them with `python -m tevcore build-data`")
    return paths


def shard_kind(path: Path) -> str:
    """What a shard holds, from its own header: "gen" (responses the target generated) or "text" (teacher-forced
    text); "unknown" for a shard written without the record."""
    with safe_open(str(path), framework="pt") as handle:
        return (handle.metadata() or {}).get("kind", "unknown")


def load_shards(folder: Path) -> list[dict[str, torch.Tensor]]:
    """Every finished shard of a set, in index order, checked against the ledger; clear errors for a broken one."""
    folder = Path(folder)
    ledger = shard_ledger.recorded(folder)
    out = []
    for path in shard_files(folder):
        problem = shard_ledger.read_problem(path, ledger)
        try:
            if problem is None:
                out.append(load_file(str(path)))
        except Exception as err:  # safetensors raises several types for a damaged file
            problem = str(err)
        if problem is not None:
            raise ValueError(f"shard {path} is damaged ({problem}); rerun build-data on {folder} to rebuild it")
    return out


def data_folders(spec: str | Path) -> list[Path]:
    """The folders of a data spec: one folder, or several joined by commas (one set, in that order)."""
    return comma_list(str(spec), Path, "distillation set folders")


def read_manifests(spec: str | Path) -> list[dict]:
    """Every folder's manifest; sets that can be joined share the target and the stored hidden layers."""
    manifests = [read_manifest(folder) for folder in data_folders(spec)]

    def shape(manifest: dict) -> tuple:
        return manifest.get("target_name"), manifest.get("config", {}).get("hidden_layers")

    for folder, other in zip(data_folders(spec), manifests):
        if shape(other) != shape(manifests[0]):
            raise ValueError(f"{folder} was built for another target or other hidden layers than "
                             f"{data_folders(spec)[0]}; they cannot be joined")
    return manifests


def check_data_target(spec: str | Path, target: Target) -> None:
    """Features and teacher rows of one target are no training data for another."""
    manifest = read_manifests(spec)[0]
    shape = (manifest.get("vocab_size"), manifest.get("hidden_size"))
    fingerprint = manifest.get("target_fingerprint")  # absent in sets built before it was recorded
    if shape != (target.vocab_size, int(target.model.config.hidden_size)) or (
            fingerprint is not None and fingerprint != target_fingerprint(target)):
        raise ValueError(f"{spec} was built for target {manifest.get('target_name')}, not for {target.name}; "
                         f"build a set for it with `build-data --target`")


def read_manifest(folder: Path) -> dict:
    """A set's manifest; a missing, empty, non-JSON or foreign one is a one-line error naming the file."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: not a distillation set")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is damaged: it is not UTF-8 text") from None
    except json.JSONDecodeError as err:
        what = "empty" if not path.read_bytes().strip() else f"not valid JSON ({err})"
        raise ValueError(f"{path} is damaged: it is {what}") from None
    except RecursionError:
        raise ValueError(f"{path} is damaged: it nests too deeply to be a manifest") from None
    missing = [key for key in MANIFEST_KEYS if not isinstance(manifest, dict) or key not in manifest]
    if missing or not isinstance(manifest.get("config", {}), dict) or not isinstance(manifest["shards"], int):
        raise ValueError(f"{path} is not a distillation-set manifest (it needs {', '.join(MANIFEST_KEYS)} and "
                         "a config object)")
    return manifest


def build_progress(folder: Path) -> tuple[int, int] | None:
    """(shards written, shards planned) of a build: the plan is the manifest's, written before the first shard,
    so a reader needs no guess at it. None while there is no readable manifest yet."""
    try:
        planned = read_manifest(folder)["shards"]
    except (OSError, ValueError):
        return None
    return sum(shard_path(Path(folder), i).is_file() for i in range(planned)), planned
