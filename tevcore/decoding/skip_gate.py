"""Deciding, before drafting, whether a round is worth drafting at all.

Trimming (`tevcore.decoding.trim`) turns a round whose drafted tree is forecast to
yield too little into a plain one-token step. Forecasting needs the draft,
and on a CPU a drafter costs a sixth of a one-token forward: paid in every
such round, that alone loses to autoregressive decoding. The gate learns,
per decode, whether rounds WITHOUT cheap evidence (a proposer may know for
free that this round is promising, e.g. a context-lookup match) have been
keeping any of their tree; while none of the recent ones did, such rounds
skip the drafter too, and every `recheck_every`-th of them drafts again to
look. Rounds with evidence are always drafted. The gate only chooses which
tree (possibly the root alone) the round scores, so exactness is untouched.
"""

from __future__ import annotations

from collections import deque


class SkipGate:
    """Per-decode memory of whether drafting rounds without evidence has paid lately."""

    def __init__(self, enabled: bool, memory: int = 4, recheck_every: int = 8) -> None:
        if memory < 1 or recheck_every < 1:
            raise ValueError("memory and recheck_every must be >= 1")
        self.enabled = enabled
        self.recheck_every = recheck_every
        self._recent: deque[bool] = deque(maxlen=memory)  # did drafted no-evidence rounds pass?
        self._skipped_since_check = 0

    def should_draft(self, evidence: bool) -> bool:
        if not self.enabled or evidence or len(self._recent) < self._recent.maxlen or any(self._recent):
            return True
        if self._skipped_since_check + 1 >= self.recheck_every:
            return True
        self._skipped_since_check += 1
        return False

    def observe(self, evidence: bool, kept_any: bool) -> None:
        """Record whether a drafted round kept any of its tree."""
        if not evidence:
            self._recent.append(kept_any)
            self._skipped_since_check = 0
