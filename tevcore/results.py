"""The one result record every measuring command writes, its writer, its reader and its table.

A result file is `{"schema", "version", "command", "meta", "settings",
"summary", "partial", "rows"}`: `meta` is the same block for every command
(what ran, where and when, from which seed: `RunMeta`), `settings` the
command's own inputs (the sets, budgets, model), `summary` its figures over
all rows (goals met, a test count), `rows` one object per measured cell.
bench, bench-verifiers, rounds-at-context, eval-drafter, compare and each
step of the GPU proof write it through `write_result`, and the app reads it
with `read_result`, so a reader never guesses which shape it holds.
"""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Sequence

from tabulate import tabulate

from tevcore.outputs import write_json, written

SCHEMA = "tevcore.result"
VERSION = 1
PACKAGES = ("torch", "transformers", "numpy", "tevcore")
RECORD_KEYS = frozenset({"schema", "version", "command", "meta", "settings", "summary", "partial", "rows"})
# Row keys of results written before "block" came to name only the block-verification rule: the mean tokens a
# round emits was `mean_block_length` (eval-drafter's and compare's cells: `block_length`). A file a user kept
# from then still reads, under today's names.
RENAMED_ROW_KEYS = {"mean_block_length": "mean_emitted", "mean_block_length_se": "mean_emitted_se",
                    "block_length": "mean_emitted"}


def git_commit(folder: Path = Path(__file__).parent) -> str:
    """HEAD of the checkout holding `folder`, with '-dirty' when tracked files differ from it.

    A figure measured with uncommitted weights or code (a drafter about to be
    committed) must not read as the commit before them.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=folder).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions() -> dict[str, str | None]:
    """The installed version of each package a figure depends on (None where one is not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def command_line(program: str, argv: Sequence[str]) -> str:
    """The command as a user would type it again: `program` (e.g. 'python -m tevcore') and its arguments."""
    return " ".join([program, shlex.join(argv)]).strip()


@dataclass(frozen=True)
class RunMeta:
    """What every result records beside its figures, taken when the command starts (the commit then is the
    code that runs, even if the checkout moves on during a long run)."""

    command_line: str
    commit: str
    packages: dict[str, str | None]
    torch_threads: int
    device: str
    machine: str
    started: str
    seed: int | None

    @classmethod
    def now(cls, command_line: str, device: str, seed: int | None) -> RunMeta:
        import torch

        return cls(command_line=command_line, commit=git_commit(), packages=package_versions(),
                   torch_threads=torch.get_num_threads(), device=str(device),
                   machine=f"{platform.machine()} {platform.processor() or ''}".strip(),
                   started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), seed=seed)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunMeta:
        return cls(**data)


@dataclass
class ResultRecord:
    """One measuring command's result: the shared meta block, its own settings and summary, its rows."""

    command: str
    meta: RunMeta
    rows: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    partial: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": VERSION, "command": self.command, "meta": asdict(self.meta),
                "settings": self.settings, "summary": self.summary, "partial": self.partial, "rows": self.rows}

    @classmethod
    def from_dict(cls, data: Any, name: str = "the result") -> ResultRecord:
        """The record in `data`, or a ValueError naming what is wrong with it."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"{name} is not a tevcore result (no \"schema\": \"{SCHEMA}\"); results are written by "
                             "bench, bench-verifiers, rounds-at-context, eval-drafter, compare and the GPU proof")
        if data.get("version") != VERSION:
            raise ValueError(f"{name} is a result of version {data.get('version')}; this tevcore reads version "
                             f"{VERSION}")
        if set(data) != RECORD_KEYS:
            raise ValueError(f"{name}: the record's keys differ from the schema: missing "
                             f"{sorted(RECORD_KEYS - set(data))}, extra {sorted(set(data) - RECORD_KEYS)}")
        rows = data["rows"]
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise ValueError(f"{name}: 'rows' must be a list of objects")
        try:
            meta = RunMeta.from_dict(data["meta"])
        except TypeError as err:
            raise ValueError(f"{name}: the meta block does not match RunMeta ({err})") from None
        return cls(command=data["command"], meta=meta, rows=_renamed(rows), settings=data["settings"],
                   summary=data["summary"], partial=data["partial"])


def _renamed(value: Any) -> Any:
    """`value` with every key of `RENAMED_ROW_KEYS` under its new name, at any depth (compare's rows hold cells)."""
    if isinstance(value, dict):
        return {RENAMED_ROW_KEYS.get(key, key): _renamed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item) for item in value]
    return value


def write_result(path: str | Path, record: ResultRecord, force: bool) -> Path:
    """Write `record` at `path` through the one atomic writer and report where on stderr (stdout keeps the
    table, which a user may pipe). Without `force` an existing file is never replaced: the command refused
    it before running (`outputs.check_not_replacing`), and one that appeared during the run is kept."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    where = write_json(path, record.to_dict(), overwrite=force)
    print(written(where, path, partial=record.partial is not None), file=sys.stderr)
    return where


def read_result(source: str | Path | bytes, name: str | None = None) -> ResultRecord:
    """The record in a result file (a Path) or in its contents (bytes or text); `name` names it in errors."""
    if isinstance(source, Path):
        name = name or str(source)
        try:
            source = source.read_bytes()
        except OSError as err:
            raise ValueError(f"cannot read {source}: {err.strerror}") from None
    name = name or "the result"
    try:
        data = json.loads(source)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{name} is not a JSON file: {err}") from None
    return ResultRecord.from_dict(data, name)


@dataclass(frozen=True)
class Column:
    """One column of a printed table: its header, the row's key (or a function of the row) and a format spec."""

    header: str
    key: str | Callable[[dict[str, Any]], Any]
    spec: str = ""

    @property
    def align(self) -> str:
        """Figures (a column with a format spec) right-aligned, names left-aligned."""
        return "right" if self.spec else "left"

    def cell(self, row: dict[str, Any]) -> str:
        value = self.key(row) if callable(self.key) else row.get(self.key)
        if value is None:
            return "-"
        return format(value, self.spec) if self.spec else str(value)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """The rows as a plain-text table (tabulate lays it out; '-' where a row has no such figure)."""
    return tabulate([[column.cell(row) for column in columns] for row in rows],
                    headers=[column.header for column in columns], tablefmt="simple", disable_numparse=True,
                    colalign=[column.align for column in columns])

