import json

import pytest

from tevcore.lab.datasets import HELDOUT_EVERY, Prompt, categories_in_turn, load_prompts


def _prompt(item_id: str, category: str | None) -> Prompt:
    return Prompt("set", item_id, f"text {item_id}", category=category)


def test_categories_in_turn_interleaves_in_first_seen_order_and_keeps_file_order_within():
    items = [_prompt("a1", "a"), _prompt("a2", "a"), _prompt("a3", "a"), _prompt("b1", "b"), _prompt("c1", "c"),
             _prompt("b2", "b")]
    assert [p.item_id for p in categories_in_turn(items)] == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_items_without_a_category_keep_file_order():
    items = [_prompt(str(i), None) for i in range(5)]
    assert categories_in_turn(items) == items
    assert categories_in_turn([]) == []


def test_heldout_cut_of_mt_bench_samples_every_category_once():
    first = load_prompts("mt-bench", "heldout", n=8)
    assert sorted(p.category for p in first) == sorted({p.category for p in load_prompts("mt-bench", "all")})
    heldout_ids = {p.item_id for p in load_prompts("mt-bench", "heldout")}
    assert {p.item_id for p in first} <= heldout_ids


def test_heldout_order_changes_no_membership_and_train_keeps_file_order():
    every = load_prompts("spec-bench", "all")
    heldout = load_prompts("spec-bench", "heldout")
    assert sorted(p.item_id for p in heldout) == sorted(p.item_id for i, p in enumerate(every) if i % HELDOUT_EVERY == 0)
    assert [p.category for p in heldout[:4]] == ["translation", "summarization", "qa", "rag"]
    train = load_prompts("spec-bench", "train")
    assert train == [p for i, p in enumerate(every) if i % HELDOUT_EVERY]


def test_a_users_jsonl_keeps_its_categories(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"prompt": "p1", "category": "x"}, {"prompt": "p2", "category": "x"}, {"prompt": "p3", "category": "y"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prompts = load_prompts(str(path), n=3)
    assert [p.text for p in prompts] == ["p1", "p2", "p3"]  # a user's file is used whole, in its own order
    assert [p.category for p in prompts] == ["x", "x", "y"]


# ---------------------------------------------------------------- a user's own prompt file

def test_a_prompt_file_with_a_byte_order_mark_reads_like_one_without(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + '{"prompt": "first"}\n{"prompt": "caf\u00e9"}\n'.encode())
    assert [p.text for p in load_prompts(str(path))] == ["first", "caf\u00e9"]


@pytest.mark.parametrize("content, message", [
    (b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n', "line 2: not UTF-8 text \\(byte 0xe9 at column 16\\)"),
    (b'\xff\xfe{\x00"\x00', "line 1: not UTF-8 text \\(byte 0xff at column 1\\)"),  # UTF-16
    (b'{"prompt": "ok"}\n\n\n{"prompt": "\xc3"}\n', "line 4: not UTF-8 text"),  # a cut multi-byte character
    ('{"prompt": "half \\ud83d an emoji"}\n'.encode(), "line 1: the prompt is not valid UTF-8 text: character 6 is "
                                                      "'\\\\ud83d', a lone surrogate"),
    ('{"prompt": "ok"}\n{"question": "\\udcff"}\n'.encode(), "line 2: the prompt is not valid UTF-8 text"),
    (b"", "holds no prompts"),
    (b"\n \n\t\n", "holds no prompts"),
    (b"\xef\xbb\xbf", "holds no prompts"),
])
def test_a_prompt_file_the_tokenizer_could_not_take_is_refused_naming_file_and_line(content, message, tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"{path}.*{message}"):
        load_prompts(str(path))


@pytest.mark.parametrize("n", [0, -1, -5, True, 2.5])
def test_a_number_of_prompts_below_one_is_refused_not_a_silent_cut(n, tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    with pytest.raises(ValueError, match="the number of prompts must be an integer >= 1"):
        load_prompts(str(path), n=n)
