"""The one reader of every upload and file the app reads, held to the profile's byte caps.

Two caps of the one `Limits` object apply: `upload_bytes` to the bytes a file holds (refused before a file on disk
is read), and `text_bytes` to the text a file may expand to, so a small gzip cannot fill the server's memory when
it is decompressed (a trace's reader stops at the cap; `text_of` here stops there too). A refusal is a
`CapExceeded` whose one line names the file, its size and the cap.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from tevcore.room.limits import CapExceeded, Limits


@dataclass(frozen=True)
class Upload:
    """A file's bytes, read under the caps, with the text cap its contents are read under."""

    name: str
    data: bytes
    text_cap: int

    @property
    def gzipped(self) -> bool:
        return self.name.endswith(".gz")


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MB" if count >= 2**20 else f"{count / 1024:.1f} KB"


def _check_size(limits: Limits, size: int, name: str) -> None:
    if size > limits.upload_bytes:
        raise CapExceeded(f"{name} is {_size(size)}, over this server's upload cap of {_size(limits.upload_bytes)} "
                          "(upload_bytes)")


def read_upload(limits: Limits, data: bytes, name: str) -> Upload:
    """An uploaded file's bytes (named as the participant named it); CapExceeded past `upload_bytes`."""
    _check_size(limits, len(data), name)
    return Upload(name, bytes(data), limits.text_bytes)


def read_file(limits: Limits, path: str | Path, name: str | None = None) -> Upload:
    """A file on the server's disk (in a participant's space, a run folder), its size checked before it is read;
    CapExceeded past `upload_bytes`, OSError when it cannot be read."""
    path = Path(path)
    name = name or path.name
    _check_size(limits, path.stat().st_size, name)
    with open(path, "rb") as handle:
        data = handle.read(limits.upload_bytes + 1)  # a file that grew since stat is still held to the cap
    _check_size(limits, len(data), name)
    return Upload(name, data, limits.text_bytes)


def text_of(upload: Upload) -> str:
    """The file's text (decompressed when its name ends in .gz), at most its text cap; CapExceeded past the cap,
    ValueError when it is not gzip or not UTF-8."""
    data = upload.data
    if upload.gzipped:
        inflater = zlib.decompressobj(wbits=31)  # gzip framing
        try:
            data = inflater.decompress(upload.data, upload.text_cap + 1)
        except zlib.error as err:
            raise ValueError(f"{upload.name} is not a gzip file: {err}") from None
    if len(data) > upload.text_cap:
        raise CapExceeded(f"{upload.name} holds more than {_size(upload.text_cap)} of text, over this server's cap "
                          "(text_bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{upload.name} is not UTF-8 text: {err}") from None

