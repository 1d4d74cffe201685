"""Bad numbers, runs that would find no work, text a tokenizer cannot take and unknown compare variants.

Each is refused with exit code 2 and one line naming the flag, file or line,
before any model loads or anything trains, and nothing is written. The cases
extend the battery of test_bad_inputs.py (same runner, same placeholders).
"""

from __future__ import annotations

import pytest

from test_bad_inputs import DECODE, _fill, files_under, run_cli

CASES = [
    # numbers: refused by the flag's own parser, before any model load
    ("round", DECODE + ["--seed", str(2 ** 64)], "argument --seed: a seed must lie in [0, 4294967295]"),
    ("round", DECODE + ["--seed", str(2 ** 32)], "argument --seed: a seed must lie in"),
    ("generate", DECODE + ["--seed", "-1"], "argument --seed: a seed must lie in"),
    ("bench", ["--seed", str(10 ** 30), "--out", "{dir}/b.json"], "argument --seed"),
    ("bench", ["--threads", "0", "--out", "{dir}/b.json"], "argument --threads: must lie in [1, "),
    ("bench", ["--threads", "-4", "--out", "{dir}/b.json"], "argument --threads: must lie in [1, "),
    ("bench", ["--threads", "100000", "--out", "{dir}/b.json"], "the CPU cores this process may use"),
    ("bench", ["--threads", "two", "--out", "{dir}/b.json"], "argument --threads: expected a number of threads"),
    ("bench-verifiers", ["--threads", "0", "--out", "{dir}/v.json"], "argument --threads"),
    ("bench-verifiers", ["--seed", str(2 ** 64), "--out", "{dir}/v.json"], "argument --seed"),
    ("eval-drafter", ["--threads", "999999"], "argument --threads"),
    ("eval-drafter", ["--seed", str(2 ** 70)], "argument --seed"),
    ("train", ["{dir}/run", "--threads", "0"], "argument --threads"),
    ("train", ["{dir}/run", "--seed", str(2 ** 64)], "argument --seed"),
    ("build-data", ["{dir}/data", "--threads", "-1"], "argument --threads"),
    ("build-data", ["{dir}/data", "--seed", str(2 ** 64)], "argument --seed"),
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--threads", "0"], "argument --threads"),
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--seed", "-3"], "argument --seed"),
    # a run that would find no work
    ("bench", ["--n", "0", "--out", "{dir}/b.json"], "argument --n: must be an integer >= 1, got 0"),
    ("bench", ["--n", "-2", "--out", "{dir}/b.json"], "argument --n: must be an integer >= 1, got -2"),
    ("bench", ["--max-new-tokens", "0", "--out", "{dir}/b.json"], "argument --max-new-tokens"),
    ("bench", ["--dataset", "{dir}/empty.jsonl", "--out", "{dir}/b.json", "--target", "{tiny}"], "holds no prompts"),
    ("bench", ["--dataset", "{dir}/blank.jsonl", "--out", "{dir}/b.json", "--target", "{tiny}"], "holds no prompts"),
    ("bench-verifiers", ["--prompts", "0", "--out", "{dir}/v.json"], "argument --prompts"),
    ("bench-verifiers", ["--rounds", "-1", "--out", "{dir}/v.json"], "argument --rounds"),
    ("bench-verifiers", ["--positions", "0", "--out", "{dir}/v.json"], "argument --positions"),
    ("eval-drafter", ["--per-set", "0"], "argument --per-set"),
    ("eval-drafter", ["--per-set", "-6"], "argument --per-set"),
    ("eval-drafter", ["--greedy-sets", "{dir}/empty.jsonl", "--temperatures", "0"], "holds no prompts"),
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--per-set", "0"], "argument --per-set"),
    # text the tokenizer cannot take
    ("round", ["--prompt", "caf\udce9", "--target", "{tiny}"], "argument --prompt: the prompt is not valid UTF-8"),
    ("generate", ["--prompt", "a\ud800b", "--target", "{tiny}"], "character 2 is '\\ud800', a lone surrogate"),
    ("bench", ["--dataset", "{dir}/latin1.jsonl", "--out", "{dir}/b.json", "--target", "{tiny}"],
     "latin1.jsonl, line 2: not UTF-8 text (byte 0xe9 at column 16)"),
    ("bench", ["--dataset", "{dir}/surrogate.jsonl", "--out", "{dir}/b.json", "--target", "{tiny}"],
     "surrogate.jsonl, line 1: the prompt is not valid UTF-8 text"),
    # compare checks every variant name before it trains the first
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--target", "{tiny}", "--variants", "distill,exit-Q"],
     "unknown variant 'exit-Q'"),
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--target", "{tiny}", "--variants", "distill,,typo"],
     "unknown variant 'typo'"),
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--target", "{tiny}", "--variants", "distill,distill"],
     "names distill more than once"),
    ("compare", ["{dir}/cmp", "--data", "{dir}", "--target", "{tiny}", "--budgets", "8,0"], "--budgets must be"),
]


@pytest.fixture(scope="module")
def tiny(tiny_model_folder) -> str:
    return str(tiny_model_folder("llama"))


@pytest.mark.parametrize("command, flags, message", CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_refused_in_one_line_before_any_work(command, flags, message, tiny, tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    (tmp_path / "surrogate.jsonl").write_text('{"prompt": "half \\ud83d of an emoji"}\n')
    places = {"{tiny}": tiny, "{dir}": str(tmp_path)}
    before = files_under(tmp_path)
    code, err = run_cli([command] + [_fill(flag, places) for flag in flags], capsys)
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith(("error:", "tev "))]) == 1
    assert files_under(tmp_path) == before  # nothing trained, measured or written
