"""`python -m tevcore conformance MODULE:FUNCTION`: run the conformance suite on a verifier and print each case.

FUNCTION has the reference signature (`tevcore.verify.reference`); the exit
status is 0 when every case passes, 1 when one fails (2 for bad input, as for
every command). `tevcore.verify.controls:NAME` names a negative control,
which must fail.
"""

from __future__ import annotations

import argparse
import importlib
import time

from tevcore.verify.conformance import CASES, CaseResult, run_suite


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("verifier", nargs="?", metavar="MODULE:FUNCTION",
                        help="the verifier to test, e.g. tevcore.verify.reference:verify")
    parser.add_argument("--case", action="append", default=None, metavar="NAME",
                        help="run only this case (repeatable; names as --list prints them)")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    parser.add_argument("--seed", type=int, default=0, help="seed of the trees' and the verifier's draws")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every case's sample size (larger: more power, longer)")


def load_verifier(spec: str):
    """The function MODULE:FUNCTION names, or a one-line ValueError."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ValueError(f"name the verifier as MODULE:FUNCTION, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import {module_name}: {err}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"{module_name} has no function {name!r}")
    return function


def run(args: argparse.Namespace) -> int:
    if args.list:
        for case in CASES:
            print(f"{case.group:10}  {case.trees:13}  {case.name}")
        return 0
    if not args.verifier:
        raise ValueError("name the verifier to test as MODULE:FUNCTION (or give --list)")
    if not args.scale > 0:
        raise ValueError(f"--scale must be > 0, got {args.scale}")
    verify = load_verifier(args.verifier)
    print(f"conformance of {args.verifier} (seed {args.seed}):")
    start = time.perf_counter()

    def report(result: CaseResult) -> None:
        print(result.line(), flush=True)

    results = run_suite(verify, args.case, args.seed, args.scale, report)
    failed = [r for r in results if not r.passed]
    print(f"{len(results) - len(failed)} of {len(results)} cases passed in {time.perf_counter() - start:.1f} s"
          + (f": {args.verifier} FAILS conformance ({len(failed)} case(s) marked FAIL)" if failed else ""))
    return 1 if failed else 0
