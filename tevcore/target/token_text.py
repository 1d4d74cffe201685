"""A token's text as a reader can read it: whole tokens decoded, a byte piece of a character marked as bytes.

A byte-level tokenizer splits a character it has no token for (most non-Latin text) into byte tokens. Decoded one
at a time, each is an incomplete UTF-8 sequence and shows as the replacement character '�', so a tree of such
tokens reads as a row of identical '�'. A node holds one token, so its text names the bytes instead
('⟨bytes e4 b8⟩'); a run of tokens (an emitted block) is decoded as one run, where the bytes join into their
characters again.
"""

from __future__ import annotations

from collections.abc import Sequence

REPLACEMENT = "\ufffd"


def _byte_decoder() -> dict[str, int] | None:
    """The byte-level BPE alphabet's inverse (character -> byte), where transformers provides the alphabet."""
    try:
        from transformers.convert_slow_tokenizer import bytes_to_unicode
    except ImportError:  # a transformers without it: byte tokens are then marked by id
        return None
    return {char: byte for byte, char in bytes_to_unicode().items()}


def byte_label(tokenizer, token: int) -> str:
    """'⟨bytes e4 b8⟩' for a byte-level token that is part of a character ('⟨byte token 1234⟩' where its bytes
    cannot be read off the tokenizer's alphabet)."""
    piece = tokenizer.convert_ids_to_tokens(int(token))
    decoder = _byte_decoder()
    if isinstance(piece, str) and decoder is not None and piece and all(c in decoder for c in piece):
        return "⟨bytes " + " ".join(f"{decoder[c]:02x}" for c in piece) + "⟩"
    return f"⟨byte token {int(token)}⟩"


def token_texts(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each token's own text; a token that decodes alone to an incomplete character is marked as its bytes."""
    if tokenizer is None:
        return [str(int(t)) for t in ids]
    texts = tokenizer.batch_decode([[int(t)] for t in ids])
    return [byte_label(tokenizer, t) if REPLACEMENT in text else text for t, text in zip(ids, texts)]


def run_text(tokenizer, ids: Sequence[int]) -> str:
    """A run of tokens decoded as one text: byte tokens join into their characters."""
    if tokenizer is None:
        return "".join(str(int(t)) for t in ids)
    return tokenizer.decode([int(t) for t in ids])
