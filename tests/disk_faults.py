"""A full disk, simulated: the writers of `tevcore.diskwrite` and `tevcore.outputs` create the file, then writing
it raises ENOSPC."""

from __future__ import annotations

import errno


def disk_full_on(monkeypatch, match: str, times: int = 1):
    """Make the `times`-th write (and later ones) of a path containing `match` fail with ENOSPC."""
    import builtins

    import tevcore.diskwrite as diskwrite
    import tevcore.outputs as outputs

    seen = []

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def opening(path, mode="r", *args, **kwargs):
        handle = builtins.open(path, mode, *args, **kwargs)
        if match in str(path) and ("w" in mode or "a" in mode):
            seen.append(path)
            if len(seen) >= times:
                return Full(handle)
        return handle

    monkeypatch.setattr(diskwrite, "open", opening, raising=False)
    monkeypatch.setattr(outputs, "open", opening, raising=False)
