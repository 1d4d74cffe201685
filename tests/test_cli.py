"""The `round` command on the embedded default: table on stdout, a trace anyone can recompute."""

from __future__ import annotations

import pytest
import torch

from tevcore.cli import main
from tevcore.engine.flow import path_log_probs
from tevcore.engine.records import read_trace


@pytest.mark.parametrize("tree_flags", [[], ["--builder", "mixed:2,1,1", "--verifier", "rrs"]])
def test_round_prints_the_tree_and_writes_a_recomputable_record(tmp_path, capsys, tree_flags):
    out = tmp_path / "round.jsonl"
    code = main(["round", "--prompt", "Name three colours.", "--proposer", "rollout", "--budget", "6",
                 "--temperature", "1.0", "--seed", "0", "--device", "cpu", "--out", str(out), *tree_flags])
    assert code == 0
    printed = capsys.readouterr().out
    assert "stand-in" in printed and "1 + C" in printed and "top missing tokens" in printed
    trace = read_trace(out)
    record = trace.rounds[0]
    assert record.proposer.startswith("stand-in") and record.tree.size == 6
    assert len(record.token_texts) == record.tree.num_nodes == len(record.missing_texts)
    # the flow can be recomputed from the stored per-node edge probabilities and parents
    log_p = path_log_probs(record.tree, record.flow.edge_prob.log())
    assert torch.allclose(log_p.exp(), record.flow.path_prob, atol=1e-9)
    assert abs(float(record.flow.exit_mass.sum()) - 1.0) < 1e-6
    assert record.path[0] == 0 and record.exit_node == record.path[-1]
    if tree_flags:  # a mixed tree keeps its draws, each node's first child marked fixed
        draws = record.tree.draws
        assert draws.mixed and all(draws.fixed_at(node)[0] for node in draws.parents.unique().tolist())


def test_a_mixed_rrs_round_recomputes_from_its_trace(tmp_path, default_target):
    """The trace of a mixed round recomputed at the prompt's context: the stand-in drafter's rows again, the
    recorded draws replayed through the builder's own code (the same tree, the same q), the target's rows again
    (the same flow); the recorded verdict is one rrs can give trying each node's drawn siblings first and the
    fixed child last (the trail refuses any other)."""
    from tevcore.decoding.loop import prompt_ids
    from tevcore.engine.builder_specs import parse_builder
    from tevcore.engine.draft_rows import as_draft_rows
    from tevcore.engine.sampled import depth_rows, grow_sampled
    from tevcore.proposers import resolve_proposer
    from tevcore.target.session import TargetSession
    from tevcore.verify.scored import scored_round
    from tevcore.verify.trail import rrs_trail

    out = tmp_path / "mixed.jsonl"
    assert main(["round", "--prompt", "Name three colours.", "--proposer", "rollout", "--builder", "mixed:3,2,1",
                 "--verifier", "rrs", "--budget", "8", "--temperature", "1.0", "--seed", "3", "--device", "cpu",
                 "--out", str(out)]) == 0
    record = read_trace(out).rounds[0]
    session = TargetSession(default_target)
    session.prefill(prompt_ids(default_target, "Name three colours."), reserve=16)
    assert session.root_token == int(record.tree.tokens[0])
    rows = resolve_proposer("rollout", default_target).propose(session)
    drawn = record.tree.draws
    replayed = []  # per node that drew from q, in node order (the builder's order), its drawn tokens
    for node in range(record.tree.num_nodes):
        children, flags = drawn.at(node)[0], drawn.fixed_at(node)
        tokens = [int(record.tree.tokens[c]) for c, fixed in zip(children, flags) if not fixed]
        if tokens:
            replayed.append(tokens)
    script = iter(replayed)
    shape = parse_builder("mixed:3,2,1").shape
    tree = grow_sampled(session.root_token, depth_rows(as_draft_rows(rows), shape), shape, 8, 1.0,
                        lambda q, k, replace: next(script))
    assert tree.tokens.tolist() == record.tree.tokens.tolist() and tree.parents.tolist() == \
        record.tree.parents.tolist()
    assert torch.allclose(tree.draws.q, drawn.q, rtol=1e-3)
    round_ = scored_round(tree, session.score_tree(tree).logits, 1.0)
    assert torch.allclose(round_.flow.edge_prob, record.flow.edge_prob, atol=1e-3)
    trail = rrs_trail(round_, record.path, record.bonus_token)
    assert trail.path == record.path
    for node in {step.node for step in trail.steps}:
        kinds = [step.fixed for step in trail.steps if step.node == node]
        assert kinds == sorted(kinds)  # drawn tries first


def test_bad_input_is_a_message_not_a_traceback(capsys):
    code = main(["round", "--prompt", "hi", "--budget", "-3", "--proposer", "rollout"])
    assert code == 2
    assert "budget" in capsys.readouterr().err


@pytest.mark.parametrize("value, message", [("often", "'off', 'auto' or a number"), ("-1", "finite number > 0")])
def test_a_bad_trim_is_refused_before_loading(capsys, value, message):
    assert main(["generate", "--prompt", "hi", "--trim", value]) == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------- Ctrl-C: one line, and the rounds made are kept
def _interrupted_after(real, count: int, made: list):
    """`real` (a round generator function) that raises KeyboardInterrupt after `count` rounds (or at its end)."""
    def rounds(*args, **kwargs):
        for record in real(*args, **kwargs):
            if len(made) == count:
                break
            made.append(record)
            yield record
        raise KeyboardInterrupt

    return rounds


def _decode_argv(command: str, folder, *extra: str) -> list[str]:
    return [command, "--prompt", "Count: one two three", "--target", str(folder), "--proposer", "rollout",
            "--device", "cpu", "--budget", "3", "--max-new-tokens", "40", *extra]


@pytest.mark.parametrize("rounds_before", [0, 1, 3])
def test_ctrl_c_during_generate_keeps_the_rounds_made_as_a_partial_trace(rounds_before, tiny_model_folder, tmp_path,
                                                                        capsys, monkeypatch):
    import tevcore.decoding.loop as loop

    made: list = []
    monkeypatch.setattr(loop, "rounds", _interrupted_after(loop.rounds, rounds_before, made))
    out = tmp_path / "run.jsonl.gz"
    code = main(_decode_argv("generate", tiny_model_folder("llama"), "--out", str(out)))
    captured = capsys.readouterr()
    assert code == 130
    assert captured.err.strip().splitlines()[-1] == "interrupted: generate stopped by Ctrl-C"
    assert "Traceback" not in captured.err and "KeyboardInterrupt" not in captured.err
    if not made:  # nothing made: nothing written, not an empty trace
        assert not out.exists() and "wrote" not in captured.out + captured.err
        return
    assert f"wrote {out} (partial: the run was interrupted)" in captured.err and "wrote" not in captured.out
    trace = read_trace(out)
    assert [r.index for r in trace.rounds] == [r.index for r in made]
    assert trace.rounds[-1].emitted_tokens == made[-1].emitted_tokens
    assert trace.meta["partial"] == f"interrupted after {len(made)} rounds"


def test_ctrl_c_during_generate_without_out_or_during_round_is_one_line(tiny_model_folder, capsys, monkeypatch):
    import tevcore.decoding.loop as loop

    real = loop.rounds
    for command, count in (("generate", 2), ("round", 0)):
        monkeypatch.setattr(loop, "rounds", _interrupted_after(real, count, []))
        code = main(_decode_argv(command, tiny_model_folder("llama")))
        err = capsys.readouterr().err
        assert code == 130 and err.strip().splitlines()[-1] == f"interrupted: {command} stopped by Ctrl-C"
        assert "Traceback" not in err


@pytest.mark.slow
def test_a_real_sigint_during_generate_ends_in_one_line_and_a_partial_trace(tiny_model_folder, tmp_path):
    """The signal itself, not a raised exception: a child process waits in its third round until SIGINT."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "run.jsonl"
    script = (
        "import signal, sys, time\n"
        # Ctrl-C as in a terminal, even where pytest runs as a background job (which starts children with SIGINT
        # ignored, and Python then raises no KeyboardInterrupt)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import tevcore.decoding.loop as loop\n"
        "real = loop.rounds\n"
        "def rounds(*a, **k):\n"
        "    for i, r in enumerate(real(*a, **k)):\n"
        "        yield r\n"
        "        if i == 1:\n"
        "            print('READY', file=sys.stderr, flush=True)\n"
        "            time.sleep(120)\n"
        "loop.rounds = rounds\n"
        "from tevcore.cli import main\n"
        f"sys.exit(main({_decode_argv('generate', tiny_model_folder('llama'), '--out', str(out))!r}))\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in child.stderr:
            if line.strip() == "READY":
                break
        child.send_signal(signal.SIGINT)
        stdout, rest = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130
    assert rest.strip().splitlines()[-1] == "interrupted: generate stopped by Ctrl-C"
    assert f"wrote {out} (partial" in rest and "wrote" not in stdout
    assert [r.index for r in read_trace(out).rounds] == [0, 1]


def test_generate_writes_the_text_alone_to_stdout_and_its_report_to_stderr(tiny_model_folder, tmp_path, capsys):
    """`generate ... > out.txt` keeps the generated text alone in the file: statistics and the trace line are
    reports, on stderr."""
    out = tmp_path / "run.jsonl"
    assert main(_decode_argv("generate", tiny_model_folder("llama"), "--out", str(out), "--no-chat")) == 0
    captured = capsys.readouterr()
    trace = read_trace(out)
    assert captured.out == "".join(record.emitted_text for record in trace.rounds)
    assert "tokens/s" in captured.err and f"wrote {out}" in captured.err
