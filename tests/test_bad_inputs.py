"""A battery of bad inputs: each gets one clear error that names the problem, never a traceback or a silent answer.

Every case asserts the exit code (CLI, run in-process) or the exception type
(library), that the message names what is wrong, and that nothing was written
half-way. Models are tiny (a 128-token random Llama with a character tokenizer).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tevcore.cli import main
from tevcore.engine.builders import best_first
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, StageTimings, write_trace
from tevcore.verify.trace_checks import read_trace
from tevcore.engine.tree import DraftTree
from tevcore.verify.verifiers import EXACT_VERIFIERS, get_verifier

VOCAB = 12


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse refuses a malformed flag itself
        code = stop.code
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny(tiny_model_folder) -> str:
    return str(tiny_model_folder("llama"))


# ---------------------------------------------------------------- CLI flags of every command
# {tiny}: the tiny model folder; {dir}: the test's folder; {file}: a plain file in it; {busy}: a locked run folder
DECODE = ["--prompt", "hi", "--target", "{tiny}", "--proposer", "rollout", "--device", "cpu"]
CLI_CASES = [
    ("round", DECODE + ["--budget", "-1"], "budget"),
    ("round", DECODE + ["--budget", "many"], "invalid int value"),
    ("round", DECODE + ["--budget", "1000000000"], "exceeds the model's context"),
    ("round", DECODE + ["--temperature", "-1"], "temperature must be >= 0"),
    ("round", DECODE + ["--temperature", "nan"], "temperature must be finite"),
    ("round", DECODE + ["--temperature", "inf"], "temperature must be finite"),
    ("round", DECODE + ["--max-new-tokens", "0"], "max_new_tokens must be an integer >= 1"),
    ("round", DECODE + ["--max-new-tokens", "100000000"], "exceeds the model's context"),
    ("round", DECODE + ["--builder", "bushy"], "bushy"),
    ("round", DECODE + ["--builder", "width:0"], "width"),
    ("round", DECODE + ["--verifier", "oracle"], "unknown verifier 'oracle'"),
    ("round", DECODE + ["--drafter-dtype", "half"], "unknown drafter dtype 'half'"),
    ("round", DECODE + ["--trim", "often"], "'off', 'auto' or a number"),
    ("round", DECODE + ["--out", "{dir}"], "is a folder"),
    ("round", DECODE + ["--out", "/no/such/dir/t.jsonl"], "the folder /no/such/dir does not exist"),
    ("round", DECODE + ["--out", "{dir}/t.txt"], "ends in .jsonl"),
    ("round", DECODE + ["--out", "{file}/t.jsonl"], "plain.txt is a file, so {file} cannot be a folder"),  # issue 51
    ("generate", DECODE + ["--out", "{file}/sub/t.jsonl"], "plain.txt is a file, so {file}/sub cannot be a folder"),
    # issue 51: a trailing '/' named a file after the folder (a later bad flag ends the old code's run early)
    ("bench", ["--out", "{dir}/new/", "--dataset", "nonsense"], "{dir}/new/ ends in '/', so it names a folder"),
    ("bench", ["--out", "{dir}/", "--dataset", "nonsense"], "ends in '/', so it names a folder"),
    ("bench-verifiers", ["--out", "{dir}/v/", "--budgets", "0"], "ends in '/', so it names a folder"),
    ("eval-drafter", ["--json", "{dir}/e/", "--budgets", "0"], "ends in '/', so it names a folder"),
    ("round", DECODE + ["--device", "bogus"], "unknown device 'bogus'"),
    ("round", DECODE + ["--device", "cuda"] if not torch.cuda.is_available() else DECODE + ["--device", "bogus:9"],
     "device"),
    ("round", ["--prompt", "hi", "--target", "some-org/some-model"], "offline"),
    ("round", ["--prompt", "hi", "--target", "/no/such/model.gguf"], "GGUF file not found"),
    ("round", ["--prompt", "hi", "--target", "{dir}"], "is not a Hugging Face model folder (no config.json)"),
    ("round", ["--prompt", "hi", "--target", "{file}"], "neither a model folder nor a .gguf file"),
    ("round", DECODE[:4] + ["--proposer", "/no/such/folder"], "drafter folder not found: /no/such/folder"),
    ("round", DECODE[:4] + ["--proposer", "telepathy"], "unknown proposer 'telepathy'"),
    ("round", DECODE[:4] + ["--proposer", "{file}"], "drafter folder not found"),
    ("round", ["--prompt", "", "--target", "{tiny}", "--proposer", "rollout"], "the prompt is empty"),
    ("round", ["--prompt", "x" * 600, "--target", "{tiny}", "--proposer", "rollout", "--no-chat"],
     "exceeds the model's context"),
    ("round", ["--target", "{tiny}"], "the following arguments are required: --prompt"),
    ("generate", DECODE + ["--budget", "-5"], "budget"),
    ("generate", DECODE + ["--out", "{dir}"], "is a folder"),
    ("generate", DECODE + ["--temperature", "warm"], "invalid float value"),
    ("bench", ["--temperatures", "-1", "--out", "{dir}/b.json"], "temperature"),
    ("bench", ["--out", "{dir}"], "is a folder"),
    ("bench", ["--out", "{file}/b.json"], "is a file"),
    ("bench", ["--dataset", "nonsense", "--out", "{dir}/b.json", "--target", "{tiny}"], "unknown prompt set"),
    ("bench", ["--datasets", "/no/such/sets", "--out", "{dir}/b.json"], "--datasets /no/such/sets: no such folder"),
    ("bench-verifiers", ["--budgets", "0", "--out", "{dir}/v.json"], "budgets must be positive integers"),
    ("bench-verifiers", ["--verifiers", "bogus", "--out", "{dir}/v.json"], "unknown verifier 'bogus'"),
    ("bench-verifiers", ["--out", "{dir}"], "is a folder"),
    ("build-data", ["{file}"], "is a file, not a folder"),
    ("build-data", ["{dir}/data", "--target", "some-org/some-model"], "offline"),
    ("train", ["{file}"], "is a file, not a folder"),
    ("train", ["{dir}/run", "--config", "{dir}/none.json"], "none.json"),
    ("train", ["{dir}/run", "--config", "{file}"], "is not valid JSON"),
    ("train", ["{dir}/run", "--steps", "0", "--data", "{dir}"], "steps must be a positive integer"),
    ("train", ["{dir}/run", "--export", "{file}"], "is a file, not a folder"),
    ("eval-drafter", ["--budgets", "0"], "a budget must be an integer >= 1 or 'chain'"),
    ("eval-drafter", ["--json", "{dir}"], "is a folder"),
    ("teleport", [], "invalid choice: 'teleport'"),
]


@pytest.mark.parametrize("command, flags, message", CLI_CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CLI_CASES)])
def test_a_bad_flag_exits_2_with_one_line_that_names_it(command, flags, message, tiny, tmp_path, capsys):
    (tmp_path / "plain.txt").write_text("{not json")
    places = {"{tiny}": tiny, "{dir}": str(tmp_path), "{file}": str(tmp_path / "plain.txt")}
    argv = [command] + [_fill(flag, places) for flag in flags]
    before = files_under(tmp_path)
    code, err = run_cli(argv, capsys)
    assert code == 2
    assert _fill(message, places) in err and "Traceback" not in err
    assert files_under(tmp_path) == before  # nothing written half-way


def _fill(flag: str, places: dict[str, str]) -> str:
    for key, value in places.items():
        flag = flag.replace(key, value)
    return flag


@pytest.mark.parametrize("name, value", [("WORLD_SIZE", "two"), ("WORLD_SIZE", "0"), ("LOCAL_RANK", "first")])
def test_a_bad_launcher_variable_is_named_in_its_one_line(name, value, tmp_path, capsys, monkeypatch):
    """Issue 51: a WORLD_SIZE that is no number said only "invalid literal for int() with base 10"."""
    from tevcore import ranks

    monkeypatch.setenv("WORLD_SIZE", "2" if name == "LOCAL_RANK" else value)
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(ranks.torch.cuda, "is_available", lambda: True)  # where LOCAL_RANK is read
    with pytest.raises(ValueError, match=f"the environment variable {name} must be a whole number >= "
                                         f"{0 if name == 'LOCAL_RANK' else 1}, got '{value}'"):
        ranks.device_for_rank("auto")
    if name == "WORLD_SIZE":
        code, err = run_cli(["bench", "--target", "some-org/some-model", "--out", str(tmp_path / "b.json")], capsys)
        assert code == 2 and "Traceback" not in err and "environment variable WORLD_SIZE must be" in err


def test_a_second_train_on_a_busy_folder_is_refused_before_any_work(tmp_path, capsys):
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".lock").write_text(str(owner.pid))
        from tevcore.train.rundir import RunLock

        with pytest.raises(ValueError, match=f"in use by training process {owner.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        owner.kill()
        owner.wait()


# ---------------------------------------------------------------- library calls

def _tree() -> DraftTree:
    return DraftTree(tokens=[1, 2, 3, 4], parents=[-1, 0, 0, 1], draft_logp=[0.0, -0.5, -1.0, -0.2])


TREE_CASES = [
    (dict(tokens=[1.0, 2.5], parents=[-1, 0], draft_logp=[0, -1]), "tokens must be integer ids"),
    (dict(tokens=torch.tensor([1.0, 2.0]), parents=[-1, 0], draft_logp=[0, -1]), "tokens must be integer ids"),
    (dict(tokens=[[1, 2]], parents=[-1, 0], draft_logp=[0, -1]), "tokens must be 1-D"),
    (dict(tokens=[1, 2], parents=[[-1, 0]], draft_logp=[0, -1]), "parents must be 1-D"),
    (dict(tokens=[1, 4611686018427387904], parents=[-1, 0], draft_logp=[0, -1]), "at most 2147483647"),
    (dict(tokens=[1, 2 ** 70], parents=[-1, 0], draft_logp=[0, -1]), "tokens must be a 1-D sequence of numbers"),
    (dict(tokens=[1, -2], parents=[-1, 0], draft_logp=[0, -1]), "non-negative"),
    (dict(tokens=[], parents=[], draft_logp=[]), "at least the root"),
    (dict(tokens=[1, 2], parents=[-1, 1], draft_logp=[0, -1]), "parents must precede their children"),
    (dict(tokens=[1, 2, 2], parents=[-1, 0, 0], draft_logp=[0, -1, -2]), "siblings must carry distinct tokens"),
    (dict(tokens=[1, 2], parents=[-1, 0], draft_logp=[0, float("nan")]), "not NaN"),
    (dict(tokens=[1, 2], parents=[-1, 0], draft_logp=[0, 0.7]), "must be <= 0"),
    (dict(tokens=[1, 2], parents=[-1, 0], draft_logp=[0, "x"]), "draft_logp must be a 1-D sequence of numbers"),
    (dict(tokens=[1, 2], parents=[-1, 0], draft_logp=[0, -1], budget="8"), "budget must be >= 0 and an integer"),
    (dict(tokens=[1, 2, 3], parents=[-1, 0, 0], draft_logp=[0, -1, -1], budget=1), "more than its budget"),
    (dict(tokens=[1, 2], parents=[0, 0], draft_logp=[0, -1]), "parents[0] must be -1"),
]


@pytest.mark.parametrize("fields, message", TREE_CASES)
def test_a_bad_tree_is_refused(fields, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DraftTree(**fields)


def _nan_at(node: int):
    def make(logits):
        logits[node, 3] = math.nan
        return logits
    return make


def _value_at(node: int, value: float):
    def make(logits):
        logits[node, 5] = value
        return logits
    return make


def _row_of(node: int, value: float):
    def make(logits):
        logits[node] = value
        return logits
    return make


LOGIT_CASES = [(_nan_at(0), "node 0 hold NaN"), (_nan_at(3), "node 3 hold NaN"),
               (_value_at(2, math.inf), "node 2 hold +inf"), (_row_of(1, -math.inf), "node 1 hold only -inf")]


@pytest.mark.parametrize("name", [*EXACT_VERIFIERS, "naive_ratio"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("spoil, message", LOGIT_CASES)
def test_every_verifier_refuses_non_finite_logits_and_names_the_node(name, temperature, spoil, message):
    logits = spoil(torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(1)))
    with pytest.raises(ValueError, match=re.escape(message)):
        get_verifier(name)(_tree(), logits, temperature, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=re.escape(message)):
        target_flow(_tree(), logits, temperature)


def test_minus_inf_logits_are_zero_probabilities_not_errors():
    logits = torch.randn(4, VOCAB)
    logits[:, 7:] = -math.inf
    verdict = get_verifier("tev")(_tree(), logits, 1.0, torch.Generator().manual_seed(0))
    assert verdict.bonus_token < 7


LIBRARY_CASES = [
    (lambda: get_verifier("tev")(_tree(), torch.randn(3, VOCAB), 1.0, torch.Generator()), ValueError, "(N+1) x V"),
    (lambda: get_verifier("tev")(_tree(), torch.randn(4, 3), 1.0, torch.Generator()), ValueError,
     "outside the target vocabulary"),
    (lambda: get_verifier("tev")(_tree(), torch.ones(4, VOCAB, dtype=torch.long), 1.0, torch.Generator()),
     ValueError, "floating point"),
    (lambda: get_verifier("tev")(_tree(), torch.randn(4, VOCAB), -1.0, torch.Generator()), ValueError, "temperature"),
    (lambda: get_verifier("tev")(_tree(), torch.randn(4, VOCAB), "hot", torch.Generator()), ValueError,
     "temperature must be a number"),
    (lambda: get_verifier("bogus"), ValueError, "unknown verifier"),
    (lambda: parse_builder("bushy"), ValueError, "bushy"),
    (lambda: best_first(1, torch.randn(2, VOCAB).log_softmax(-1), -1), ValueError, "budget"),
    (lambda: _tree().first(9), ValueError, "cannot keep 9 nodes"),
    (lambda: DraftTree.from_dict([1, 2]), ValueError, "expected an object"),
    (lambda: DraftTree.from_dict({"tokens": [1]}), ValueError, "no 'parents' field"),
]


@pytest.mark.parametrize("call, kind, message", LIBRARY_CASES)
def test_a_bad_library_call_raises_a_clear_error(call, kind, message):
    with pytest.raises(kind, match=re.escape(message)):
        call()


def test_config_checks_refuse_bad_settings():
    from tevcore.config import DecodeConfig

    for fields, message in ((dict(max_new_tokens=0), "max_new_tokens"), (dict(budget=-1), "budget"),
                            (dict(budget=True), "budget"), (dict(temperature=math.nan), "finite"),
                            (dict(verifier="x"), "unknown verifier"), (dict(tree_costs=(1.0,), budget=2), "one cost")):
        with pytest.raises(ValueError, match=message):
            DecodeConfig(**fields)


def test_prompt_sets_say_where_they_looked_and_how_to_pass_a_jsonl(tmp_path, monkeypatch):
    from tevcore.lab.datasets import load_prompts

    monkeypatch.setenv("TEVCORE_DATASETS", str(tmp_path))
    for name in ("mt-bench", "gsm8k", "spec-bench"):
        with pytest.raises(FileNotFoundError, match=f"looked for {tmp_path}/.*TEVCORE_DATASETS.*--datasets.*jsonl"):
            load_prompts(name)
    (tmp_path / "mine.jsonl").write_text('{"prompt": "ok"}\n{"prompt": ""}\n')
    with pytest.raises(ValueError, match="mine.jsonl, line 2: needs a 'prompt'"):
        load_prompts(str(tmp_path / "mine.jsonl"))
    (tmp_path / "broken.jsonl").write_text('{"prompt": "ok"}\n{oops\n')
    with pytest.raises(ValueError, match="broken.jsonl, line 2: not valid JSON"):
        load_prompts(str(tmp_path / "broken.jsonl"))
    with pytest.raises(ValueError, match="unknown prompt set"):
        load_prompts("nonsense")


def test_write_trace_leaves_nothing_half_written(tmp_path):
    def records():
        yield _record()
        raise RuntimeError("the run died")

    with pytest.raises(RuntimeError):
        write_trace(tmp_path / "t.jsonl", records())
    assert files_under(tmp_path) == set()


# ---------------------------------------------------------------- drafter folders

def _drafter_folder(tiny_target, folder: Path) -> Path:
    from tevcore.proposers.block import BlockDrafter, BlockDrafterConfig, save_drafter

    config = BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=20, hidden_layers=(1, 2),
                                context=4, depth=2, layers=1, heads=4, ffn=32)
    save_drafter(BlockDrafter(config, torch.arange(20)), folder)
    return folder


def _edit_config(**changes):
    def edit(folder: Path):
        data = json.loads((folder / "config.json").read_text())
        data.update(changes)
        (folder / "config.json").write_text(json.dumps(data))
    return edit


def _write(name: str, text: str | bytes):
    def edit(folder: Path):
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return edit


def _truncate_weights(folder: Path):
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:200])


def _draft_ids(ids: torch.Tensor):
    def edit(folder: Path):
        from safetensors.torch import load_file, save_file

        state = load_file(str(folder / "model.safetensors"))
        state["draft_ids"] = ids
        save_file(state, str(folder / "model.safetensors"))
    return edit


def _retype(name: str, dtype: torch.dtype):
    def edit(folder: Path):
        from safetensors.torch import load_file, save_file

        state = load_file(str(folder / "model.safetensors"))
        state[name] = state[name].round().to(dtype)
        save_file(state, str(folder / "model.safetensors"))
    return edit


DRAFTER_CASES = [
    (_write("config.json", "[1, 2, 3]"), ValueError, "is a JSON object, got a list"),
    (_write("config.json", "{broken"), ValueError, "not a valid block drafter config"),
    (_write("config.json", "[" * 100000), ValueError, "not a valid block drafter config"),
    (_edit_config(depth="6"), ValueError, "depth must be an integer >= 1, got '6'"),
    (_edit_config(heads=2.5), ValueError, "heads must be an integer"),
    (_edit_config(hidden_layers=[-1, 2]), ValueError, "hidden_layers must be target layer indices >= 0"),
    (_edit_config(hidden_layers="12"), ValueError, "hidden_layers must be a list"),
    (_edit_config(hidden_layers=[1, 9]), ValueError, "reads layer 9, but the target tiny-random-llama has 2 layers"),
    (_edit_config(dropout="none"), ValueError, "dropout must be a number"),
    (_edit_config(target_vocab_size=50), ValueError, "with a vocabulary of 50 tokens, but the target tiny-random-llama has 97"),
    (_edit_config(colour="red"), ValueError, "unknown block drafter config keys"),
    (_edit_config(model_type="llama"), ValueError, "model_type 'llama'"),
    (_truncate_weights, ValueError, "damaged or truncated"),
    (_draft_ids(torch.arange(90, 110)), ValueError, "outside the target vocabulary of 97 tokens"),
    (_draft_ids(torch.arange(20).float()), ValueError, "draft_ids must be a 1-D integer tensor"),
    (_draft_ids(torch.arange(5)), ValueError, r"draft_ids has shape \[5\], but .*config.json implies \[20\]"),
    (_draft_ids(torch.tensor([3] * 2 + list(range(4, 22)))), ValueError, "draft_ids repeats token 3 \\(1 ids"),
    (_draft_ids(torch.zeros(20, dtype=torch.long)), ValueError, "draft_ids repeats token 0"),
    (_draft_ids(torch.arange(20).flip(0).roll(1) % 19), ValueError, "draft_ids repeats token"),
    (_retype("bias", torch.int64), ValueError, "model.safetensors: bias holds int64 values, not floating-point"),
    (_retype("encoder.layers.0.linear1.weight", torch.int32), ValueError, "linear1.weight holds int32 values"),
    (_retype("slots", torch.bool), ValueError, "slots holds bool values"),
    (_edit_config(ffn=10**9), ValueError, r"linear1.weight has shape \[32, 64\], but .* implies \[1000000000, 64\]"),
    (_edit_config(depth=10**9), ValueError, r"slots has shape \[2, 64\], but .* implies \[1000000000, 64\]"),
    (_edit_config(context=10**9), ValueError, r"context_pos has shape \[4, 64\]"),
    (_edit_config(layers=10**9), ValueError, "says layers=1000000000, but .* holds 1 encoder layers"),
    (_edit_config(hidden_layers=[1] * 10**6), ValueError, "names 1000000 hidden_layers, but .* feature norms for 2"),
    (_write("config.json", '{"depth": ' + "[" * 100000 + "]" * 100000 + "}"), ValueError, "not a valid block drafter"),
    (lambda folder: (folder / "model.safetensors").unlink(), FileNotFoundError, "model.safetensors is missing"),
    (lambda folder: (folder / "config.json").unlink(), FileNotFoundError, "not a block drafter folder"),
]


@pytest.mark.parametrize("spoil, kind, message", DRAFTER_CASES)
def test_a_bad_drafter_folder_is_refused(spoil, kind, message, tiny_target, tmp_path):
    from tevcore.proposers.block import load_drafter

    folder = _drafter_folder(tiny_target, tmp_path / "drafter")
    spoil(folder)
    with pytest.raises(kind, match=message):
        load_drafter(folder, tiny_target)


# ---------------------------------------------------------------- trace files

def _record(index: int = 0) -> RoundRecord:
    generator = torch.Generator().manual_seed(index)
    tree = best_first(2, torch.log_softmax(torch.randn(3, VOCAB, generator=generator), -1), 6)
    logits = 3 * torch.randn(tree.num_nodes, VOCAB, generator=generator)
    flow = target_flow(tree, logits, 1.0, 3)
    verdict = get_verifier("tev")(tree, logits, 1.0, generator)
    return RoundRecord(index=index, proposer="p", builder="best_first", budget=6, temperature=1.0, context_length=5,
                       tree=tree, flow=flow, token_texts=[f"t{t}" for t in tree.tokens.tolist()],
                       missing_texts=[[f"m{t}" for t in row] for row in flow.missing_tokens.tolist()],
                       verifier="tev", path=verdict.path, exit_node=verdict.exit_node, bonus_token=verdict.bonus_token,
                       bonus_text="b", emitted_tokens=tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token],
                       emitted_text="x", timings=StageTimings(draft=0.1))


def _child_token_of_exit(data):
    tree = data["tree"]
    kids = [t for t, p in zip(tree["tokens"], tree["parents"]) if p == data["exit_node"]]
    return kids[0] if kids else None


def _set(*keys, value):
    def mutate(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value(data) if callable(value) else value
    return mutate


def _exit_with_children(data):  # a root exit: the root always has children in this tree
    data["path"], data["exit_node"] = [0], 0
    data["bonus_token"] = _child_token_of_exit(data)


TRACE_CASES = [
    (_set("path", value=[0, 99]), "node 99 is not a child of node 0"),
    (_set("path", value=[1]), "must start at the root"),
    (_set("path", value=[0, 2, 1]), "not a chain of the tree"),
    (_set("path", value="0,1"), "path must be a list"),
    (_set("exit_node", value=42), "exit_node 42 must be the last node of the path"),
    (_set("bonus_token", value=-3), "bonus_token must be a token id"),
    (_set("bonus_token", value=1.5), "bonus_token must be a token id"),
    (_exit_with_children, "is a child of the exit node 0"),
    (_set("missing_texts", value="abc"), "missing_texts must be"),
    (_set("missing_texts", value=lambda d: [row[:1] for row in d["missing_texts"]]), "missing_texts must be"),
    (_set("token_texts", value=lambda d: d["token_texts"][:-1]), "token_texts must be a list of"),
    (_set("flow", "path_prob", value=lambda d: [math.nan] + d["flow"]["path_prob"][1:]), "finite probabilities"),
    (_set("flow", "exit_mass", value=lambda d: [1.5] + d["flow"]["exit_mass"][1:]), "in \\[0, 1\\]"),
    (_set("flow", "edge_prob", value=lambda d: [-0.2] + d["flow"]["edge_prob"][1:]), "in \\[0, 1\\]"),
    (_set("flow", "child_mass", value=lambda d: d["flow"]["child_mass"][:-1]), "the flow and the tree disagree"),
    (_set("flow", "missing_tokens", value=[[1]]), "missing_tokens and missing_probs must both be"),
    (_set("flow", "missing_probs", value=lambda d: [[2.0] * len(r) for r in d["flow"]["missing_probs"]]),
     "missing_probs must hold finite probabilities"),
    (_set("flow", "temperature", value="hot"), "not a target flow record"),
    (_set("tree", "tokens", value=lambda d: [float(t) + 0.5 for t in d["tree"]["tokens"]]), "integer ids"),
    (_set("tree", "parents", value=lambda d: [-1] + [5] * (len(d["tree"]["parents"]) - 1)), "parents must precede"),
    (_set("temperature", value=-1), "temperature must be a finite number >= 0"),
    (_set("index", value="first"), "index must be an integer in \\[0, "),
    (_set("index", value=10 ** 30), "index must be an integer in \\[0, 16777216\\]"),
    (_set("context_length", value=10 ** 12), "context_length must be an integer in \\[0, 16777216\\]"),
    (_set("context_length", value=-4), "context_length must be an integer in"),
    (_set("budget", value=True), "budget must be an integer in"),
    (_set("timings", value={"draft": "slow"}), "draft must be a finite number of seconds >= 0, got 'slow'"),
    (_set("timings", value={"lunch": 1.0}), "unknown stage 'lunch'"),
    (_set("timings", value=[1.0]), "timings must map stage names to seconds"),
    (_set("timings", value={"draft": math.nan}), "draft must be a finite number of seconds >= 0, got nan"),
    (_set("timings", value={"flow": math.inf}), "flow must be a finite number of seconds >= 0, got inf"),
    (_set("timings", value={"tree_forward": -0.5}), "tree_forward must be a finite number of seconds >= 0"),
    (_set("timings", value={"commit": True}), "commit must be a finite number of seconds"),
    (lambda data: data.clear() or data.update({"schema": "tevcore.trace", "version": 1, "meta": {}}),
     "a second trace header"),
    (lambda data: data.clear() or data.update({"schema": "other", "meta": {}}), "a second trace header"),
    (_set("emitted_tokens", value=[1, "x"]), "emitted_tokens must be a list of token ids"),
    (lambda data: data.pop("flow"), "'flow'"),
]


def _trace_lines(records) -> list[str]:
    header = json.dumps({"schema": "tevcore.trace", "version": 1, "meta": {}})
    return [header] + [json.dumps(r.to_dict()) for r in records]


@pytest.mark.parametrize("mutate, message", TRACE_CASES)
def test_a_round_the_app_could_not_draw_is_refused_naming_the_file_and_round(mutate, message, tmp_path):
    records = [_record(0), _record(1)]
    data = records[1].to_dict()
    mutate(data)
    path = tmp_path / "upload-123.jsonl"
    path.write_text("\n".join(_trace_lines(records[:1]) + [json.dumps(data)]) + "\n")
    with pytest.raises(ValueError, match=message) as raised:
        read_trace(path, name="my-run.jsonl")
    assert str(raised.value).startswith("my-run.jsonl, line 3 (round 1): ") and "upload-123" not in str(raised.value)


FILE_CASES = [
    (b"", "trace.jsonl", "is empty"),
    (b"\x00\xff\xfe garbage", "trace.jsonl", "not a readable trace file|first line is not JSON"),
    (b"not json\n", "trace.jsonl", "first line is not JSON"),
    (b'{"schema": "other"}\n', "trace.jsonl", "not a tevcore trace file"),
    (b'{"schema": "tevcore.trace", "version": 99}\n', "trace.jsonl", "version 99"),
    (b'{"schema": "tevcore.trace", "version": 1, "meta": []}\n', "trace.jsonl", "meta must be an object"),
    (("[" * 200000 + "]" * 200000).encode(), "trace.jsonl", "first line is not JSON"),
    (b"plain text, not gzip", "trace.jsonl.gz", "not a readable trace file"),
    (gzip.compress(b'{"schema": "tevcore.trace", "version": 1}\n' * 50)[:40], "trace.jsonl.gz", "not a readable"),
]


@pytest.mark.parametrize("content, file_name, message", FILE_CASES)
def test_a_broken_trace_file_is_refused(content, file_name, message, tmp_path):
    path = tmp_path / file_name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_trace(path)


def test_a_deeply_nested_round_is_refused_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(_trace_lines([])[0] + "\n" + "[" * 200000 + "]" * 200000 + "\n")
    with pytest.raises(ValueError, match="line 2 \\(round 0\\)"):
        read_trace(path)


def test_a_missing_trace_file_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="trace file not found"):
        read_trace(tmp_path / "none.jsonl")


@pytest.mark.parametrize("config", ['{"depth": ' + "[" * 100000 + "]" * 100000 + "}", "[" * 100000, b"\xff\xfe{}"],
                         ids=["nested-value", "nested-unclosed", "not-utf8"])
def test_a_drafter_folder_whose_config_cannot_be_read_is_one_line_in_the_cli(config, tiny, tmp_path, capsys):
    folder = tmp_path / "drafter"
    folder.mkdir()
    (folder / "config.json").write_bytes(config if isinstance(config, bytes) else config.encode())
    code, err = run_cli(["round", "--prompt", "hi", "--target", tiny, "--proposer", str(folder), "--device", "cpu"],
                        capsys)
    assert code == 2 and "Traceback" not in err and f"{folder / 'config.json'} is not a valid block drafter" in err


@pytest.mark.parametrize("command", ["bench", "eval-drafter"])
def test_an_over_long_prompt_in_a_jsonl_is_named_by_its_file_and_line(command, tiny_model_folder, tmp_path, capsys):
    from tevcore.cli import main

    prompts = tmp_path / "mine.jsonl"
    prompts.write_text('{"prompt": "short"}\n\n{"prompt": "' + "word " * 400 + '"}\n')  # line 3: > 512 tokens
    common = ["--target", str(tiny_model_folder("llama")), "--device", "cpu", "--max-new-tokens", "4",
              "--temperatures", "1", "--budgets", "2"]
    argv = {"bench": ["bench", "--dataset", str(prompts), "--n", "2", "--proposer", "rollout", "--verifiers", "tev",
                      "--no-peers", "--out", str(tmp_path / "out.json"), *common],
            "eval-drafter": ["eval-drafter", "rollout", "--sample-sets", str(prompts), "--per-set", "2",
                             "--json", str(tmp_path / "out.json"), *common]}[command]
    code = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {prompts}, line 3: the prompt has ") and "context of 512 tokens" in err[0]
    assert not (tmp_path / "out.json").exists()
