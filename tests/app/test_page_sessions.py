"""The verifier comparison's and the workshop's one state object (issue 50): work kept across a page switch with
nothing computed again, and a result shown beside settings changed since says which."""

from __future__ import annotations

from explorer_kit import count_turns
from test_pages import page
from test_sampled_pages import PRESET


def test_a_result_made_with_other_settings_stays_shown_and_says_which_settings_changed():
    at = page("2_Verifier_comparison.py").run()
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    before = at.dataframe[0].value
    at.number_input(key="vc_n").set_value(6_000).run()
    at.number_input(key="vc_seed").set_value(3).run()
    assert not at.exception
    warning = next(w.value for w in at.warning if w.value.startswith("The results shown were made with other"))
    assert "draws per verifier 5,000 (now 6,000)" in warning and "seed 0 (now 3)" in warning
    assert "temperature" not in warning  # what did not change is not listed
    assert at.dataframe[0].value.equals(before)  # the results are still there


def test_the_comparisons_results_survive_a_page_switch_without_a_queue_turn(monkeypatch):
    at = page("Home.py").run()
    at.switch_page("pages/2_Verifier_comparison.py").run()
    at.number_input(key="vc_ex_budget").set_value(12).run()
    at.number_input(key="vc_n").set_value(5_000)
    at.button(key="vc_run").click().run()
    before = at.dataframe[0].value
    turns = count_turns(monkeypatch)
    at.switch_page("pages/4_Exit_law_workshop.py").run()  # streamlit forgets the comparison's widgets here
    taken = len(turns)
    at.switch_page("pages/2_Verifier_comparison.py").run()
    assert not at.exception and not at.error
    assert at.number_input(key="vc_ex_budget").value == 12 and at.number_input(key="vc_n").value == 5_000
    assert at.dataframe[0].value.equals(before) and not at.warning  # the same results, made with these settings
    assert len(turns) == taken  # the tree's law, the results and the result files were kept: nothing queued


def test_the_workshops_seed_and_coupling_rates_survive_a_page_switch(monkeypatch):
    at = page("Home.py").run()
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    at.number_input(key="ws_seed").set_value(7).run()
    at.switch_page("pages/2_Verifier_comparison.py").run()
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    assert at.number_input(key="ws_seed").value == 7
    at.selectbox(key="ws_preset").set_value(PRESET).run()
    at.number_input(key="ws_c_rounds").set_value(400)
    at.button(key="ws_c_run").click().run()
    rates = [c.value for c in at.caption if "accepted in" in c.value]
    assert rates and "of 400 rounds" in rates[0]
    turns = count_turns(monkeypatch)
    at.switch_page("pages/2_Verifier_comparison.py").run()
    taken = len(turns)
    at.switch_page("pages/4_Exit_law_workshop.py").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="ws_preset").value == PRESET
    assert [c.value for c in at.caption if "accepted in" in c.value] == rates
    assert len(turns) == taken  # the coupling's laws and rates were kept: nothing queued
