import pytest

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
