"""A drafter kind defined and registered here, and nowhere else, works through round, bench, eval-drafter and train.

The kind is a per-root table: for each root token, K rows of logits over the
whole vocabulary ('table:<folder>'). It is deliberately not any kind the
project ships, so every command that handles it proves the registry is the
only place a kind has to be named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_models import save_tiny_distillation_set
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from tevcore.cli import main
from tevcore.engine.draft_rows import DraftRows
from tevcore.proposers import resolve_proposer
from tevcore.proposers.base import ProposerBase
from tevcore.proposers.kind import DrafterKind, prefixed
from tevcore.proposers.registry import KINDS
from tevcore.results import read_result
from tevcore.target.loading import load_target

pytestmark = pytest.mark.slow  # trains, benches and evaluates (tiny models, ~20 s in all)

PREFIX = "table:"
DEPTH = 3


class Table(nn.Module):
    def __init__(self, vocab: int, depth: int) -> None:
        super().__init__()
        self.depth, self.vocab = depth, vocab
        self.logits = nn.Parameter(torch.zeros(vocab, depth * vocab))

    def forward(self, roots: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.logits[roots].view(-1, self.depth, self.vocab), -1)


def save_table(table: Table, folder: Path, dtype: torch.dtype | None = None) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"logits": table.logits.detach().to(dtype or torch.float32).contiguous()}, str(folder / "table.safetensors"))
    (folder / "config.json").write_text(json.dumps({"kind": "table", "vocab": table.vocab, "depth": table.depth}))
    return folder


def load_table(folder: str | Path) -> Table:
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"no table drafter in {folder}")
    config = json.loads(config_file.read_text())
    table = Table(config["vocab"], config["depth"])
    table.logits.data.copy_(load_file(str(Path(folder) / "table.safetensors"))["logits"].float())
    return table


class TableProposer(ProposerBase):
    def __init__(self, table: Table, name: str | None = None) -> None:
        self.table, self.depth, self.name = table.eval(), table.depth, name or "table drafter"

    @torch.no_grad()
    def propose(self, session) -> DraftRows:
        return DraftRows(self.table(torch.tensor([session.root_token]))[0])


class TableTraining:
    def __init__(self, table: Table, depth: int) -> None:
        self.network, self.depth = table.train(), depth
        self.vocab_map = torch.arange(table.vocab)

    def rows(self, model, batch, anchors, known):
        return model(batch.roots)[:, :self.depth], batch.teacher_probs

    def tree_rows(self, batch, anchors, logq):
        return logq.detach()

    def save(self, folder, dtype=None):
        return save_table(self.network, folder, dtype)


class TableTrainer:
    shape_fields = ("depth",)

    def check(self, source, config, target):
        table = load_table(source)
        if config.depth > table.depth:
            raise ValueError(f"--depth {config.depth} exceeds the table's {table.depth}")
        return table

    def start(self, table, config, anchors, target):
        return TableTraining(table, config.depth)

    def load(self, folder, config, target):
        return TableTraining(load_table(folder), config.depth)

    def shape(self, source):
        return {"depth": load_table(source).depth}


KIND = DrafterKind("table", PREFIX + "<folder>", "a per-root table of draft rows (a test kind)", prefixed(PREFIX),
                   lambda source, target, options: TableProposer(load_table(source), options.name), TableTrainer())


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(KINDS, KIND.name, KIND)  # the one registry line


@pytest.fixture(scope="module")
def setup(tiny_model_folder, tmp_path_factory):
    """(target folder, prompts file, distillation set, a table drafter folder)."""
    folder = tiny_model_folder("llama")
    target = load_target(str(folder), device="cpu")
    root = tmp_path_factory.mktemp("new-kind")
    save_tiny_distillation_set(target, folder, root / "data")
    torch.manual_seed(0)
    table = Table(target.vocab_size, DEPTH)
    table.logits.data.normal_()
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("abcabcab", "hello there")))
    return folder, prompts, root / "data", save_table(table, root / "table")


COMMON = ["--device", "cpu", "--threads", "1"]


def test_the_kind_is_named_in_the_help_texts(registered, capsys):
    with pytest.raises(SystemExit):
        main(["round", "--help"])
    assert "table:<folder>" in capsys.readouterr().out.replace("\n", "")


def test_round_and_bench_run_the_new_kind(registered, setup, tmp_path, capsys):
    folder, prompts, _, table = setup
    assert main(["round", "--prompt", "abcab", "--no-chat", "--proposer", f"{PREFIX}{table}", "--target", str(folder),
                 "--device", "cpu", "--budget", "4", "--max-new-tokens", "4"]) == 0
    assert "proposer: table drafter" in capsys.readouterr().out
    out = tmp_path / "bench.json"
    assert main(["bench", "--proposer", f"{PREFIX}{table}", "--dataset", str(prompts), "--n", "2",
                 "--max-new-tokens", "6", "--temperatures", "0", "--budgets", "4", "--verifiers", "tev", "--no-peers",
                 "--target", str(folder), "--out", str(out), *COMMON]) == 0
    report = read_result(out)
    assert report.settings["proposer"] == "table drafter"
    (spec,) = [row for row in report.rows if row["method"] == "ours speculative"]
    assert spec["prompts"] == 2 and spec["rounds"] > 0 and spec["mean_expected_length"] >= 1.0


def test_eval_drafter_and_train_run_the_new_kind(registered, setup, tmp_path):
    folder, prompts, data, table = setup
    run = tmp_path / "run"
    assert main(["train", str(run), "--data", str(data), "--target", str(folder), "--init", f"{PREFIX}{table}",
                 "--device", "cpu", "--depth", "3", "--context", "4", "--steps", "3", "--batch-size", "2",
                 "--warmup", "1", "--lr", "0.05", "--checkpoint-every", "2", "--tree-lambda", "0.1",
                 "--tree-anchors", "2", "--tree-pool", "4", "--tree-budget", "4"]) == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3] and all("tree_E" in m for m in metrics)
    before, after = load_table(table).logits, load_table(run / "drafter").logits
    assert not torch.allclose(before, after, atol=1e-3)  # the steps moved it, and it saved in its own layout
    report = tmp_path / "eval.json"
    assert main(["eval-drafter", f"{PREFIX}{run / 'drafter'}", "--target", str(folder), "--budgets", "4",
                 "--temperatures", "1", "--sample-sets", str(prompts), "--per-set", "2", "--max-new-tokens", "6",
                 "--json", str(report), *COMMON]) == 0
    (cell,) = read_result(report).rows
    assert cell["prompts"] == 2 and cell["rounds"] > 0 and cell["expected_length"] >= 1.0
    target = load_target(str(folder), device="cpu")
    assert isinstance(resolve_proposer(f"{PREFIX}{run / 'drafter'}", target), TableProposer)


def test_a_kind_that_is_not_registered_is_an_unknown_proposer(setup):
    target = load_target(str(setup[0]), device="cpu")
    with pytest.raises(ValueError, match="unknown proposer 'table:"):
        resolve_proposer(f"{PREFIX}{setup[3]}", target)
