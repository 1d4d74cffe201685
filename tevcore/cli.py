"""`tev` / `python -m tevcore`: subcommands over the engine (no math lives here)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from itertools import islice
from pathlib import Path

from tevcore.results import command_line

# subcommand -> module with add_arguments(parser) and run(args); imported only when used
COMMANDS = {
    "round": ("tevcore.cli", "one speculative round on the target; print the tree and its flow"),
    "generate": ("tevcore.cli", "speculative generation of a prompt, streamed round by round"),
    "bench": ("tevcore.lab.bench", "end-to-end speed benchmark against our AR and HF peers"),
    "bench-verifiers": ("tevcore.lab.bench_verifiers", "verifier decision latency on real trees"),
    "rounds-at-context": ("tevcore.lab.context_rounds_cli", "many fresh sampled trees at one context: every rule's "
                          "E[L] against 1 + C, and its first token against the target's row"),
    "build-data": ("tevcore.train.data_cli", "build a distillation set for a target"),
    "train": ("tevcore.train.train_cli", "train a drafter (distillation or ExitTrain)"),
    "eval-drafter": ("tevcore.train.eval_cli", "E = 1 + C and block length per budget for a drafter"),
    "compare-designs": ("tevcore.train.designs_cli", "tree designs (builder + rule) at the same contexts of one "
                        "decode: each one's E[L] and paired difference"),
    "compare": ("tevcore.train.compare", "ExitTrain variants vs distillation from one start, paired evaluation"),
    "conformance": ("tevcore.verify.conformance_cli", "run the conformance suite on a tree verifier with the reference "
                    "signature (MODULE:FUNCTION): pass or fail per case"),
}


READS_PROMPT_SETS = ("bench", "bench-verifiers", "build-data", "eval-drafter", "compare-designs")

# where each command writes: (argument, flag, kind); checked before the command does any work. A "trace" or
# "file" is a result: an existing one is replaced only with --force (a folder is resumed by its command).
OUTPUTS = {
    "round": [("out", "--out", "trace")], "generate": [("out", "--out", "trace")],
    "bench": [("out", "--out", "file")], "bench-verifiers": [("out", "--out", "file")],
    "rounds-at-context": [("out", "--out", "file")],
    "eval-drafter": [("json", "--json", "file")], "compare-designs": [("json", "--json", "file")],
    "build-data": [("out", "out", "folder")],
    "train": [("out", "out", "folder"), ("export", "--export", "folder")],
    "compare": [("out", "out", "folder")],
}
# results a command writes inside its output folder: (argument of the folder, file name), also kept without --force
RESULTS_IN_FOLDER = {"compare": ("out", "compare.json")}
FORCE_HELP = "replace an existing result file (without it, a run refuses to start over one)"


def writes_results(command: str) -> bool:
    return command in RESULTS_IN_FOLDER or any(kind != "folder" for _, _, kind in OUTPUTS.get(command, []))


def check_outputs(args: argparse.Namespace) -> None:
    """Every output path of the chosen command is writable (a trace's folder must already exist), and no
    existing result would be replaced without --force."""
    from tevcore.outputs import check_not_replacing, check_output_file, check_output_folder

    force = getattr(args, "force", False)
    for name, flag, kind in OUTPUTS.get(args.command, []):
        value = getattr(args, name, None)
        if value is None:
            continue
        if kind == "folder":
            check_output_folder(value, flag)
            continue
        check_output_file(value, flag, make_parents=kind == "file")
        if kind == "trace" and not str(value).endswith((".jsonl", ".jsonl.gz")):
            raise ValueError(f"{flag} {value}: a trace file name ends in .jsonl or .jsonl.gz")
        check_not_replacing(value, flag, force)
    if args.command in RESULTS_IN_FOLDER:
        name, file_name = RESULTS_IN_FOLDER[args.command]
        check_not_replacing(Path(getattr(args, name)) / file_name, "the result", force)


def _add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    from tevcore.config import TRIM_HELP, DecodeConfig
    from tevcore.engine.builder_specs import builder_help
    from tevcore.verify.registry import verifier_help
    from tevcore.flags import add_target_arguments, prompt_text, seed_value
    from tevcore.proposers.flags import add_proposer_arguments

    helps = DecodeConfig.help()
    parser.add_argument("--prompt", required=True, type=prompt_text,
                        help="user prompt (chat template applied unless --no-chat)")
    add_proposer_arguments(parser)
    parser.add_argument("--budget", type=int, default=DecodeConfig.budget, help=helps["budget"])
    parser.add_argument("--temperature", type=float, default=DecodeConfig.temperature, help=helps["temperature"])
    parser.add_argument("--builder", default=DecodeConfig.default("builder"), help=builder_help())
    parser.add_argument("--verifier", default=DecodeConfig.default("verifier"), help=verifier_help())
    parser.add_argument("--seed", type=seed_value, default=DecodeConfig.seed, help=helps["seed"])
    parser.add_argument("--max-new-tokens", type=int, default=DecodeConfig.max_new_tokens, help=helps["max_new_tokens"])
    parser.add_argument("--no-chat", action="store_true", help="feed the prompt as raw text")
    parser.add_argument("--out", help="write the rounds as a trace file (.jsonl or .jsonl.gz)")
    parser.add_argument("--trim", default="off", help=TRIM_HELP)
    add_target_arguments(parser)


def _decode_setup(args: argparse.Namespace, max_new_tokens: int):
    from dataclasses import replace

    from tevcore.decoding.autobudget import trim_costs
    from tevcore.config import DecodeConfig
    from tevcore.flags import target_from_args
    from tevcore.proposers.flags import proposer_from_args, proposer_options

    options = proposer_options(args)  # refused before loading anything, as is the config below
    config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=args.temperature, budget=args.budget,
                          builder=args.builder, verifier=args.verifier, seed=args.seed, chat=not args.no_chat,
                          trim=args.trim)
    target = target_from_args(args)
    if args.budget >= target.max_context:
        raise ValueError(f"--budget {args.budget}: a tree of that many nodes exceeds the model's context of "
                         f"{target.max_context} tokens")
    config = replace(config, tree_costs=trim_costs(target, [config.budget], config.trim)[config.budget])
    return config, target, proposer_from_args(args, target, options)


def _write(args: argparse.Namespace, records: list, target, config, partial: bool = False) -> None:
    """The rounds as a trace at --out; `partial` marks a run cut short (its rounds are still valid). The line
    saying so goes to stderr: stdout holds the command's result (the text of `generate`, the tree of `round`)."""
    from tevcore.engine.records import write_trace
    from tevcore.outputs import written

    if args.out and records:
        meta = {"target": target.name, "prompt": args.prompt, "config": config.to_dict()}
        if partial:
            meta["partial"] = f"interrupted after {len(records)} rounds"
        print(written(write_trace(args.out, records, meta, overwrite=args.force), args.out, partial), file=sys.stderr)


def print_round(record) -> None:
    """The tree as an indented table: token, draft log-prob, a, P, X, top missing tokens."""
    tree, flow = record.tree, record.flow
    print(f"proposer: {record.proposer}")
    print(f"round {record.index}: {tree.size} nodes, depth {tree.max_depth}, T={record.temperature}, "
          f"1 + C = {flow.expected_length:.3f}")
    print(f"{'node':>4}  {'token':<28}{'log q':>8}{'a':>8}{'P':>8}{'X':>8}  top missing tokens (p)")
    for node in _depth_first(tree):
        label = "  " * int(tree.depths[node]) + repr(record.token_texts[node])
        missing = ", ".join(f"{text!r} {p:.3f}" for text, p in
                            zip(record.missing_texts[node][:3], flow.missing_probs[node][:3].tolist()))
        print(f"{node:>4}  {label[:28]:<28}{float(tree.draft_logp[node]):>8.2f}{float(flow.edge_prob[node]):>8.3f}"
              f"{float(flow.path_prob[node]):>8.3f}{float(flow.exit_mass[node]):>8.3f}  {missing}")
    if record.verifier:
        print(f"verifier {record.verifier}: accepted path {record.path}, exit node {record.exit_node}, "
              f"bonus {record.bonus_text!r}, block length {record.emitted}")


def _depth_first(tree) -> list[int]:
    children, order, stack = tree.children(), [], [0]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(children[node]))
    return order


def _run_round(args: argparse.Namespace) -> int:
    from tevcore.decoding.loop import rounds

    config, target, proposer = _decode_setup(args, max_new_tokens=args.max_new_tokens)
    records = list(islice(rounds(target, proposer, args.prompt, config), 1))  # Ctrl-C here: nothing made yet
    print_round(records[0])
    _write(args, records, target, config)
    return 0


def _shown_text(record, stops: set[int], target) -> str:
    """The round's emitted text without the end-of-turn token a chat model ends on (the record keeps it)."""
    text = record.emitted_text
    if record.emitted_tokens and record.emitted_tokens[-1] in stops and target.tokenizer is not None:
        return text.removesuffix(target.tokenizer.decode([record.emitted_tokens[-1]]))
    return text


def _run_generate(args: argparse.Namespace) -> int:
    from tevcore.decoding.loop import rounds
    from tevcore.timing import seconds_of

    config, target, proposer = _decode_setup(args, max_new_tokens=args.max_new_tokens)
    records = []
    stops = set(config.stop_tokens) if config.stop_tokens is not None else target.stop_token_ids()

    def stream() -> None:
        for record in rounds(target, proposer, args.prompt, config):
            records.append(record)
            sys.stdout.write(_shown_text(record, stops, target))
            sys.stdout.flush()

    try:
        seconds = seconds_of(stream, target.device)[1]
    except KeyboardInterrupt:  # keep the rounds already made, marked partial; main says "interrupted"
        _write(args, records, target, config, partial=True)
        raise
    tokens = sum(len(r.emitted_tokens) for r in records)
    # stdout holds the text alone (`generate ... > out.txt`); the statistics are a report, on stderr
    print(f"\n{tokens} tokens in {len(records)} rounds, {tokens / max(seconds, 1e-9):.1f} tokens/s, "
          f"mean block length {sum(r.emitted for r in records) / len(records):.2f} vs mean 1 + C "
          f"{sum(r.expected_length for r in records) / len(records):.2f}", file=sys.stderr)
    _write(args, records, target, config)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_decode_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return _run_round(args) if args.command == "round" else _run_generate(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tev", description="Tree speculative decoding: see, measure, improve.")
    sub = parser.add_subparsers(dest="command", required=True)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--"]:  # `torchrun ... -m tevcore -- bench ...`: the separator keeps torchrun off our flags
        argv = argv[1:]
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if name == wanted:  # import only the module of the chosen subcommand
            importlib.import_module(module_name).add_arguments(command)
            if writes_results(name):
                command.add_argument("--force", action="store_true", help=FORCE_HELP)
            if name in READS_PROMPT_SETS:
                command.add_argument("--datasets", default=None, help="folder of the shared prompt sets "
                                     "(default: $TEVCORE_DATASETS, else ../shared/datasets beside the checkout)")
    args = parser.parse_args(argv)
    args.command_line = command_line("python -m tevcore", argv)  # what a result's meta block records
    module = importlib.import_module(COMMANDS[args.command][0])
    before = os.environ.get("TEVCORE_DATASETS")
    try:
        check_outputs(args)
        if getattr(args, "datasets", None):
            if not Path(args.datasets).expanduser().is_dir():
                raise FileNotFoundError(f"--datasets {args.datasets}: no such folder")
            os.environ["TEVCORE_DATASETS"] = args.datasets  # also seen by subprocesses (torchrun ranks)
        code = int(module.run(args) or 0)
        ranks = sys.modules.get("tevcore.ranks")  # imported by the commands that can run under torchrun
        if ranks is not None:  # after success only: a rank that failed may leave others inside a collective
            ranks.leave()
        return code
    except (ValueError, OSError) as err:  # bad input and unusable files: one line, never a traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the command kept what it had made (and said where); no traceback
        print(f"interrupted: {args.command} stopped by Ctrl-C", file=sys.stderr)
        return 130
    finally:
        if before is None:
            os.environ.pop("TEVCORE_DATASETS", None)
        else:
            os.environ["TEVCORE_DATASETS"] = before


def run_command(name: str, argv: list[str] | None = None) -> int:
    """`python -m <module of a subcommand> ARGS` is `python -m tevcore NAME ARGS`: one registry, one error path."""
    return main([name, *(sys.argv[1:] if argv is None else argv)])
