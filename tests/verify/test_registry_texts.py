"""The registry's words for the pages: each rule's standing at a temperature, what its verdicts are tested against
(its law and its bonus), and whether that is X itself; read from the entries, so a new rule brings its own."""

from __future__ import annotations

import pytest

from tevcore.verify import rules
from tevcore.verify.laws import FOIL, OWN_LAW, exit_law
from tevcore.verify.registry import (RULES, STANDING_TEXTS, Rule, always, standing_text, held_to_x,
                                     laws_held_to_text, x_law_label)


def test_each_standing_is_said_in_its_entrys_words_and_a_foil_on_a_drawn_tree_says_what_it_is_there():
    assert standing_text("tev", 0.7) == "exact, optimal: exit law X, E[L] = 1 + C"
    assert standing_text("chain", 0.7) == "exact, with its own law"
    assert standing_text("greedy", 0.7) == "exact only for the T = 0 target: not this one (T = 0.7)"
    assert standing_text("greedy", 0.0) == standing_text("tev", 0.0)  # at T = 0 greedy is optimal
    assert standing_text("rrs", 1.0) == "exact over the tree's draws, with its own law on each tree"
    assert standing_text("naive_ratio", 1.0) == "NOT exact (teaching foil)"
    assert standing_text("naive_ratio", 1.0, drawn=True) == RULES["naive_ratio"].on_drawn
    assert standing_text("tev", 1.0, drawn=True) == standing_text("tev", 1.0)  # no entry of its own there
    assert set(STANDING_TEXTS) == {RULES[name].standing(t) for name in RULES for t in (0.0, 1.0)}
    with pytest.raises(ValueError, match="unknown verifier"):
        standing_text("nope", 1.0)


def test_x_is_what_the_optimal_rules_and_the_foil_are_tested_against():
    assert [name for name in RULES if held_to_x(name, 0.7)] == ["tev", "predraw", "residual", "naive_ratio"]
    assert held_to_x("greedy", 0.0) and not held_to_x("greedy", 0.7)


def test_the_laws_held_to_name_every_rule_once_grouping_one_law_and_bonus_in_registry_order():
    text = laws_held_to_text(["naive_ratio", "chain", "tev", "residual", "predraw", "greedy"], 0.7)
    groups = text.split("; ")
    assert groups[0] == (f"{x_law_label(0.7)}, bonus from p at the exit without its children's tokens "
                         "(tev, predraw, residual, naive_ratio)")
    assert groups[1].startswith("greedy's own law (the T = 0 exit), bonus from the argmax") and groups[1].endswith(
        "(greedy)")
    assert groups[2] == "chain's own law (X of the top-1 chain), bonus from p at the exit without only the chain " \
                        "child it tried (chain)"
    assert laws_held_to_text(["rrs"], 1.0) == "rrs's own law on this sampled tree, bonus from the residual left at " \
                                             "the exit (rrs)"
    assert laws_held_to_text([], 1.0) == ""


def test_a_new_entry_brings_its_own_words(monkeypatch):
    rule = Rule("mirror", "a test rule", rules.exits_predraw, rules.child_token_row, exit_law,
                standing=always(OWN_LAW), law_label=lambda t: "mirror's own law", bonus_text="its mirror row")
    monkeypatch.setitem(RULES, rule.name, rule)
    assert laws_held_to_text(["mirror", "tev"], 1.0).endswith("; mirror's own law, bonus from its mirror row (mirror)")
    assert standing_text("mirror", 1.0) == "exact, with its own law" and not held_to_x("mirror", 1.0)
    foil = Rule("foil2", "another foil", rules.exits_naive_ratio, rules.foil_child_token_row, exit_law,
                standing=always(FOIL))
    monkeypatch.setitem(RULES, foil.name, foil)
    assert held_to_x("foil2", 1.0) and standing_text("foil2", 1.0, drawn=True) == "NOT exact (teaching foil)"
