"""The conformance suite: the reference and every shipped exact rule pass it, each negative control fails it by name.

The quick tests run the cases a control must fail (named in MUST_FAIL) at their default size and the CLI's
printed lines; the slow ones run the whole default suite on the reference and on each shipped rule through the
reference signature (the round trip). Nothing here names the order in which a rule tries
a node's children: only the output law is tested.
"""

from __future__ import annotations

import pytest

from tevcore.cli import main
from tevcore.verify import reference
from tevcore.verify.conformance import CASES, run_suite
from tevcore.verify.controls import CONTROLS

pytestmark = pytest.mark.usefixtures("one_thread_module")

CASE = {case.name: case for case in CASES}
# a case each control must fail, and where it shows: its trees and settings
MUST_FAIL = {
    "shifted_logits_slice": "fixed best-first tree, T=1",
    "residual_not_renormalised": "fixed width-3,2 tree, T=0.7",
    "residual_keeps_rejected_mass": "mixed tree (top-1 fixed, 3,2), T=1",
    "argmax_at_verify": "sampled tree (i.i.d. 3,2), T=1",
    "warpers_on_q_not_p": "sampled tree (i.i.d. 4,2), V=64, T=1, top-k 20, top-p 0.9",
}
SHIPPED = ("verify_tev", "verify_predraw", "verify_residual", "verify_chain", "verify_rrs", "verify_block")


def test_every_control_has_a_case_it_must_fail():
    assert set(MUST_FAIL) == set(CONTROLS) and set(MUST_FAIL.values()) <= set(CASE)


@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_each_control_fails_its_named_case_and_the_reference_passes_it(control):
    name = MUST_FAIL[control]
    [caught] = run_suite(CONTROLS[control], [name])
    [passed] = run_suite(reference.verify, [name])
    print(caught.line(), passed.line(), sep="\n")
    assert not caught.passed and passed.passed


def test_the_cli_prints_pass_and_fail_per_case_and_exits_by_the_verdict(capsys):
    name = MUST_FAIL["argmax_at_verify"]
    assert main(["conformance", "tevcore.verify.reference:verify", "--case", name]) == 0
    assert f"PASS  {name}:" in capsys.readouterr().out
    assert main(["conformance", "tevcore.verify.controls:argmax_at_verify", "--case", name]) == 1
    out = capsys.readouterr().out
    assert f"FAIL  {name}:" in out and "FAILS conformance (1 case(s) marked FAIL)" in out


@pytest.mark.parametrize("argv,message", [
    (["conformance", "tevcore.verify.reference"], "MODULE:FUNCTION"),
    (["conformance", "no_such_module:verify"], "cannot import no_such_module"),
    (["conformance", "tevcore.verify.reference:nothing"], "has no function 'nothing'"),
    (["conformance", "tevcore.verify.reference:verify", "--case", "no such case"], "no conformance case named"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_crashing_or_malformed_verifier_fails_its_case_with_the_reason():
    def crashes(**arguments):
        raise RuntimeError("index out of range")

    def off_the_tree(**arguments):
        return [0, 99], 1

    name = "fixed best-first tree, T=1"
    assert "the verifier raised RuntimeError: index out of range" in run_suite(crashes, [name])[0].line()
    assert "not a root path of the tree" in run_suite(off_the_tree, [name])[0].line()


@pytest.mark.slow
def test_the_reference_passes_the_whole_suite():
    results = run_suite(reference.verify)
    print("\n".join(r.line() for r in results))
    assert len(results) == len(CASES) and all(r.passed for r in results)


@pytest.mark.slow
@pytest.mark.parametrize("rule", SHIPPED)
def test_round_trip_every_shipped_exact_rule_passes(rule):
    verify = getattr(reference, rule)
    results = run_suite(verify)
    print("\n".join(r.line() for r in results))
    assert results and all(r.passed for r in results)
