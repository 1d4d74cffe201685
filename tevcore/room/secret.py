"""The host's secret: checked in constant time, with a limit on wrong guesses, and advice on its strength.

A participant who keeps guessing must not find a short secret by trying: after a wrong guess the same guesser
waits before their next one is checked (1 s, doubling, at most a minute), and the whole server checks at most
`WRONG_PER_MINUTE` wrong guesses in any minute (a guesser who changes browser sessions shares that limit). A guess
made too soon is refused without being compared. When the host chooses the secret, `strength_advice` says how
far such a limit protects it.
"""

from __future__ import annotations

import hmac
import math
import string
import threading
import time
from collections import deque
from collections.abc import Callable

WRONG_PER_MINUTE = 10  # wrong guesses the server checks in any 60 s
LONGEST_WAIT_S = 60.0  # one guesser's wait after many wrong guesses
STRONG_BITS = 60  # a secret at least this strong cannot be found at the guess limit in any workshop's time
FEWEST_DISTINCT = 8  # fewer distinct characters than this is a pattern (aaaa..., 1212...), whatever its length


class TooManyGuesses(ValueError):
    """A guess refused unchecked: too soon after wrong ones; the message says when to try again."""


class SecretCheck:
    """The host secret (None: nothing unlocks) and the wrong guesses made against it."""

    def __init__(self, secret: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._secret = secret or None
        self._clock = clock
        self._lock = threading.Lock()
        self._wrong: deque[float] = deque()  # times of the server's wrong guesses in the last minute
        self._guesser: dict[str, tuple[int, float]] = {}  # guesser: (wrong guesses in a row, when the last was)

    def _wait_s(self, guesser: str, now: float) -> float:
        while self._wrong and now - self._wrong[0] >= 60:
            self._wrong.popleft()
        server = 60 - (now - self._wrong[0]) if len(self._wrong) >= WRONG_PER_MINUTE else 0.0
        misses, last = self._guesser.get(guesser, (0, now))
        own = min(2.0 ** (misses - 1), LONGEST_WAIT_S) - (now - last) if misses else 0.0
        return max(server, own, 0.0)

    def check(self, guess: str, guesser: str) -> bool:
        """Whether `guess` is the secret; TooManyGuesses (unchecked) while this guesser or the server must wait."""
        with self._lock:
            now = self._clock()
            wait = self._wait_s(guesser, now)
            if wait > 0:
                raise TooManyGuesses(f"too many wrong guesses of the host secret: try again in {math.ceil(wait)} s")
            right = self._secret is not None and hmac.compare_digest(guess.encode(), self._secret.encode())
            if right:
                self._guesser.pop(guesser, None)
            else:
                self._wrong.append(now)
                self._guesser[guesser] = (self._guesser.get(guesser, (0, now))[0] + 1, now)
            return right


def secret_bits(secret: str) -> float:
    """About how many bits a guesser faces: its length times log2 of the kinds of characters it uses."""
    kinds = sum(size for chars, size in ((string.ascii_lowercase, 26), (string.ascii_uppercase, 26),
                                         (string.digits, 10)) if any(c in chars for c in secret))
    kinds += 33 if any(not c.isascii() or not c.isalnum() for c in secret) else 0
    return len(secret) * math.log2(kinds) if secret else 0.0


def strength_advice(secret: str) -> str | None:
    """One line of advice when a host-chosen secret is weak (None when it is strong enough): under `STRONG_BITS` by
    its length and kinds of characters, or fewer than `FEWEST_DISTINCT` distinct characters."""
    bits, distinct = secret_bits(secret), len(set(secret))
    if bits >= STRONG_BITS and distinct >= FEWEST_DISTINCT:
        return None
    return (f"the host secret is weak ({len(secret)} characters, {distinct} distinct, at most about {bits:.0f} "
            "bits): the room checks at most "
            f"{WRONG_PER_MINUTE} wrong guesses a minute, and a word or a short secret can still be found by "
            "someone who keeps guessing; use 12 or more random letters and digits, or unset TEV_ROOM_SECRET to "
            "have one made")
