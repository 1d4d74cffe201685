"""Token texts a reader can read: a byte token of a non-Latin character is marked as its bytes, not shown as '�',
and a run of tokens decodes into its characters."""

from __future__ import annotations

import pytest

from tevcore.target.token_text import REPLACEMENT, run_text, token_texts


@pytest.fixture(scope="module")
def byte_tokenizer():
    """A byte-level BPE tokenizer with one token per byte and one merged ASCII word: '日' (e6 97 a5) is three
    tokens, as in a real byte-level vocabulary without that character."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {char: i for i, char in enumerate(sorted(alphabet))}
    vocab["Ġcat"] = len(vocab)
    merges = [("Ġ", "c"), ("Ġc", "a"), ("Ġca", "t")]
    for piece in ("Ġc", "Ġca"):
        vocab[piece] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core)


def test_a_byte_piece_is_marked_as_its_bytes_and_a_whole_token_is_its_text(byte_tokenizer):
    ids = byte_tokenizer.encode("日 cat", add_special_tokens=False)
    assert len(ids) == 4  # three byte tokens and ' cat'
    assert all(REPLACEMENT in byte_tokenizer.decode([t]) for t in ids[:3])  # what one-at-a-time decoding showed
    assert token_texts(byte_tokenizer, ids) == ["⟨bytes e6⟩", "⟨bytes 97⟩", "⟨bytes a5⟩", " cat"]


def test_a_run_decodes_its_bytes_into_characters(byte_tokenizer):
    ids = byte_tokenizer.encode("日 cat", add_special_tokens=False)
    assert run_text(byte_tokenizer, ids) == "日 cat"
    assert "".join(byte_tokenizer.batch_decode([[t] for t in ids])) != "日 cat"  # the old per-token join


def test_without_a_tokenizer_ids_are_their_text():
    assert token_texts(None, [5, 7]) == ["5", "7"] and run_text(None, [5, 7]) == "57"
