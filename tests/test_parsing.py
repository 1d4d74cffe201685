import argparse

import pytest

from tevcore.engine.sampling import MAX_SEED
from tevcore.flags import count_at_least_one, prompt_text, seed_value, thread_count, usable_cores
from tevcore.parsing import budget_or_chain, comma_list


def test_items_are_stripped_parsed_and_blanks_dropped():
    assert comma_list(" 4, 8,,16 ", int, "budgets") == [4, 8, 16]
    assert comma_list("mt-bench,gsm8k") == ["mt-bench", "gsm8k"]
    assert comma_list("0,1.5", float) == [0.0, 1.5]


@pytest.mark.parametrize("text", ["", " , ", ","])
def test_an_empty_list_is_refused(text):
    with pytest.raises(ValueError, match="expected comma-separated budgets"):
        comma_list(text, int, "budgets")


def test_a_bad_item_is_named():
    with pytest.raises(ValueError, match=r"'x' in '4,x' is not valid: expected comma-separated budgets"):
        comma_list("4,x", int, "budgets")


def test_a_custom_parser_error_is_kept():
    def positive(text: str) -> int:
        if int(text) < 1:
            raise ValueError("must be >= 1")
        return int(text)

    with pytest.raises(ValueError, match=r"must be >= 1"):
        comma_list("3,0", positive, "budgets")


def test_budget_or_chain():
    assert comma_list("chain, 4,8", budget_or_chain, "budgets") == ["chain", 4, 8]
    with pytest.raises(ValueError, match="must be an integer >= 1 or 'chain'"):
        comma_list("chain,0", budget_or_chain, "budgets")
    with pytest.raises(ValueError, match="'tree' in 'tree' is not valid.*integer >= 1 or 'chain'"):
        comma_list("tree", budget_or_chain, "budgets")


# ---------------------------------------------------------------- numbers and text, checked by the flag parsers


@pytest.mark.parametrize("text, message", [("0", "must be an integer >= 1, got 0"), ("-3", "got -3"),
                                           ("many", "expected an integer >= 1, got 'many'"), ("1.5", "got '1.5'")])
def test_a_count_below_one_is_refused(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        count_at_least_one(text)
    assert count_at_least_one("7") == 7


@pytest.mark.parametrize("text", ["-1", str(MAX_SEED + 1), str(2 ** 64), str(2 ** 64 + 5), str(10 ** 40)])
def test_a_seed_outside_32_bits_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"a seed must lie in \\[0, {MAX_SEED}\\]"):
        seed_value(text)


def test_the_largest_seed_works_all_the_way_to_the_generators():
    """Every seed derived from the largest (training's seed x 1_000_003 + step, bench's seed + a hash) fits torch."""
    import torch

    from tevcore.config import DecodeConfig
    from tevcore.engine.sampling import make_generator
    from tevcore.engine.sampling import draw_seed

    seed = seed_value(str(MAX_SEED))
    DecodeConfig(seed=seed)
    make_generator(draw_seed(seed, "set", 1.0, 99, "spec"))
    torch.Generator().manual_seed(seed * 1_000_003 + 10 ** 6 * 101 + 64)
    with pytest.raises(ValueError, match="seed must be an integer in"):
        DecodeConfig(seed=MAX_SEED + 1)


@pytest.mark.parametrize("text", ["0", "-1", str(usable_cores() + 1), str(10 ** 6), "auto"])
def test_threads_outside_the_usable_cores_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must lie in \\[1, |expected a number of threads"):
        thread_count(text)
    assert thread_count(str(usable_cores())) == usable_cores()


@pytest.mark.parametrize("text, position", [("caf\udce9", 4), ("\ud800", 1), ("ok \udfff", 4), ("a\udc80b", 2)])
def test_a_prompt_that_is_not_utf8_is_refused(text, position):
    with pytest.raises(argparse.ArgumentTypeError, match=f"the prompt is not valid UTF-8 text: character {position}"):
        prompt_text(text)
    assert prompt_text("caf\u00e9 \U0001F600") == "caf\u00e9 \U0001F600"
