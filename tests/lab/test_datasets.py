import json

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
