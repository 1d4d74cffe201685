"""Verification rules defined here, and registered nowhere else, reach round, bench, rounds-at-context and the app.

Two rules, each one registry entry reusing a shipped sampler (adding a rule
is its entry plus its sampler): `mirror` follows the target's draws like
predraw and runs on any tree; `drawn_mirror` recurses over the draws like rrs
and needs a tree drawn from the drafter's q. Every front end must offer each
exactly where the registry's one pairing decision says, without naming them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tevcore.cli import main
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.tree import DRAWN
from tevcore.verify.registry import valid_pairs
from tevcore.verify import rules
from tevcore.verify.laws import OPTIMAL, OVER_DRAWS, exit_law, rrs_law
from tevcore.verify.registry import RULES, Rule, always, rules_for
from tevcore.verify.trace_checks import read_trace

MIRROR = Rule("mirror", "follows the target's draws (a test rule)", rules.exits_predraw, rules.child_token_row,
              exit_law, standing=always(OPTIMAL), label="mirror (test rule)")
DRAWN_MIRROR = Rule("drawn_mirror", "recursive rejection over the draws (a test rule)", rules.exits_rrs,
                    rules.child_token_row, rrs_law, standing=always(OVER_DRAWS), needs=frozenset({DRAWN}),
                    where="divides by the q each child was drawn from", bonus_row=rules.rrs_bonus_row)
APP = Path(__file__).resolve().parents[1] / "app"
COMMON = ["--device", "cpu", "--proposer", "rollout", "--temperature", "1", "--seed", "3"]


@pytest.fixture
def registered(monkeypatch):
    for rule in (MIRROR, DRAWN_MIRROR):
        monkeypatch.setitem(RULES, rule.name, rule)  # the one registry line per rule


@pytest.fixture(scope="module")
def tiny(tiny_model_folder) -> str:
    return str(tiny_model_folder("llama"))


def test_the_registry_pairs_each_rule_with_the_trees_its_entry_names(registered):
    assert "mirror" in rules_for(parse_builder("best_first")) and "drawn_mirror" not in rules_for(
        parse_builder("best_first"))
    assert {"mirror", "drawn_mirror"} <= set(rules_for(parse_builder("sampled-wor:2,1")))
    pairs = valid_pairs([parse_builder("chain"), parse_builder("sampled:2,1")], ["mirror", "drawn_mirror"])
    assert [(b.name, v) for b, v in pairs] == [("chain", "mirror"), ("sampled:2,1", "mirror"),
                                               ("sampled:2,1", "drawn_mirror")]


def test_round_runs_each_rule_where_it_pairs_and_refuses_it_elsewhere_in_one_line(registered, tiny, tmp_path,
                                                                                     capsys):
    base = ["round", "--prompt", "hello there", "--target", tiny, "--budget", "4", *COMMON]
    assert main([*base, "--verifier", "mirror", "--out", str(tmp_path / "a.jsonl")]) == 0
    assert main([*base, "--builder", "sampled:2,1", "--verifier", "drawn_mirror",
                 "--out", str(tmp_path / "b.jsonl")]) == 0
    for name, verifier in (("a.jsonl", "mirror"), ("b.jsonl", "drawn_mirror")):
        assert read_trace(tmp_path / name).rounds[0].verifier == verifier  # the registry's trace checks pass it
    capsys.readouterr()
    assert main([*base, "--verifier", "drawn_mirror"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: verifier drawn_mirror divides by the q") and "best_first" in err[0]


def test_the_help_names_the_new_rules(registered, capsys):
    with pytest.raises(SystemExit):
        main(["round", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert "mirror = follows the target's draws" in out and "drawn_mirror" in out


def test_bench_runs_every_pair_the_registry_allows(registered, tiny, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "hello there"}) + "\n")
    out = tmp_path / "bench.json"
    assert main(["bench", "--dataset", str(prompts), "--n", "1", "--max-new-tokens", "4", "--temperatures", "1",
                 "--budgets", "4", "--verifiers", "mirror,drawn_mirror", "--builders", "best_first,sampled:2,1",
                 "--no-peers", "--target", tiny, "--device", "cpu", "--proposer", "rollout", "--threads", "1",
                 "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["builder"], r["verifier"]) for r in rows if r["method"] == "ours speculative"] == [
        ("best_first", "mirror"), ("sampled:2,1", "mirror"), ("sampled:2,1", "drawn_mirror")]


def test_rounds_at_context_runs_every_rule_the_registry_pairs(registered, tiny, capsys):
    assert main(["rounds-at-context", "--prompt", "hello there", "--target", tiny, "--proposer", "rollout",
                 "--device", "cpu", "--budget", "4", "--rounds", "20", "--builder", "sampled:2,1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("mirror ") and OPTIMAL in line for line in lines)
    assert any(line.startswith("drawn_mirror ") and OVER_DRAWS in line for line in lines)


def _explorer_sampled():
    """The app's module that lists the explorer's choices (the app's folder on the path, as the app has it)."""
    if str(APP) not in sys.path:
        sys.path.insert(0, str(APP))
    import explorer_sampled

    return explorer_sampled


def test_the_apps_option_lists_follow_the_registry(registered):
    explorer_sampled = _explorer_sampled()
    offered, refused = explorer_sampled.verifier_options(parse_builder("best_first"))
    assert "mirror" in offered and "drawn_mirror" in refused and "divides by the q" in refused["drawn_mirror"]
    offered, refused = explorer_sampled.verifier_options(parse_builder("sampled:2,1"))
    assert {"mirror", "drawn_mirror"} <= set(offered) and "drawn_mirror" not in refused


def test_the_explorer_page_offers_them(registered):
    from streamlit.testing.v1 import AppTest

    _explorer_sampled()
    at = AppTest.from_file(str(APP / "pages" / "1_Tree_explorer.py"), default_timeout=120).run()
    assert not at.exception
    options = at.sidebar.selectbox(key="ex_verifier").options
    assert "mirror (test rule)" in options or "mirror" in options
    assert not any(o.startswith("drawn_mirror") for o in options)
    at.sidebar.selectbox(key="ex_builder").set_value("sampled:K1,K2,...").run()
    assert any(o.startswith("drawn_mirror") for o in at.sidebar.selectbox(key="ex_verifier").options)


def test_the_verifier_comparison_says_what_each_new_rule_is_and_is_held_to(registered):
    """Its standing, the law and bonus its χ² is taken against, and which chart draws it: all from its entry."""
    from streamlit.testing.v1 import AppTest

    _explorer_sampled()
    at = AppTest.from_file(str(APP / "pages" / "2_Verifier_comparison.py"), default_timeout=120).run()
    assert not at.exception
    assert "mirror (test rule)" in at.multiselect(key="vc_names").options
    at.number_input(key="vc_n").set_value(2_000)
    at.button(key="vc_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    summary = at.dataframe[0].value
    column = next(c for c in summary.columns if c.startswith("at T = "))
    mirror = summary[summary["verifier"] == "mirror (test rule)"]
    assert mirror[column].iloc[0] == "exact, optimal: exit law X, E[L] = 1 + C"
    caption = next(c.value for c in at.caption if c.value.startswith("χ² compares"))
    assert "(tev, predraw, residual, naive_ratio, mirror)" in caption  # held to X and X's bonus, as its entry says
