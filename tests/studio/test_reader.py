"""The studio's one reader: every upload and file the app reads is held to the profile's byte caps, and a small gzip
that expands past the text cap is refused in one line before it fills memory."""

from __future__ import annotations

import gzip

import pytest

from tevcore.room.limits import ROOM, CapExceeded
from tevcore.studio.reader import read_file, read_upload, text_of


def test_an_upload_over_the_byte_cap_is_refused_in_one_line_naming_the_cap():
    assert read_upload(ROOM, b"x" * ROOM.upload_bytes, "t.jsonl").text_cap == ROOM.text_bytes
    with pytest.raises(CapExceeded, match=r"^big.jsonl is 6.0 MB, over this server's upload cap of 5.0 MB "
                                          r"\(upload_bytes\)$"):
        read_upload(ROOM, b"x" * (6 * 2**20), "big.jsonl")
    with pytest.raises(CapExceeded, match=r"^t.jsonl is 100.0 KB, over this server's upload cap of 64.0 KB"):
        read_upload(ROOM.with_caps(upload_bytes=65536), b"x" * 102400, "t.jsonl")


def test_a_file_on_disk_over_the_cap_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"y" * 70_000)
    with pytest.raises(CapExceeded, match=r"^r.json is 68.4 KB, over this server's upload cap of 64.0 KB"):
        read_file(ROOM.with_caps(upload_bytes=65536), path)
    assert read_file(ROOM, path).data == b"y" * 70_000


def test_a_small_gzip_that_expands_past_the_text_cap_is_refused_and_one_under_it_is_read():
    limits = ROOM.with_caps(text_bytes=1 << 20)
    bomb = gzip.compress(b"z" * 3_000_000)
    assert len(bomb) < limits.upload_bytes
    with pytest.raises(CapExceeded, match=r"^bomb.jsonl.gz holds more than 1.0 MB of text, over this server's cap "
                                          r"\(text_bytes\)$"):
        text_of(read_upload(limits, bomb, "bomb.jsonl.gz"))
    assert text_of(read_upload(limits, gzip.compress(b"ok\n"), "a.jsonl.gz")) == "ok\n"
    with pytest.raises(ValueError, match="^a.jsonl.gz is not a gzip file"):
        text_of(read_upload(limits, b"plain", "a.jsonl.gz"))


def test_a_gzipped_trace_past_the_text_cap_is_refused_by_the_trace_service_in_one_line():
    from tevcore.room.queue import ComputeQueue
    from tevcore.studio.traces import open_trace
    from tevcore.studio.turns import Seat

    limits = ROOM.with_caps(text_bytes=1 << 20)
    upload = read_upload(limits, gzip.compress(b'{"a": "' + b"z" * 3_000_000 + b'"}\n'), "bomb.jsonl.gz")
    with pytest.raises(ValueError, match=r"^bomb.jsonl.gz holds more than 1 MiB of trace text; this reader's limit "
                                         r"refuses it$"):
        open_trace(Seat(limits, ComputeQueue(1), "p"), upload)
