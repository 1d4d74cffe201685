"""Who a request belongs to: one key for all of one participant's browser tabs, so the compute queue is fair per
person, not per tab.

A Streamlit session is one tab, and the app sets no cookie of its own. What all tabs of one browser share is the
web server's XSRF cookie (`_streamlit_xsrf`, on by default): its value is `2|mask|masked token|time`, a fresh mask
on every page load over one token kept for the browser. The key is a hash of that token, so it is the same in
every tab, differs between browsers, and never repeats the token itself. Without the cookie (XSRF protection
switched off, a test run) the session's own key stands in: each tab is then its own participant, as before.
"""

from __future__ import annotations

import binascii
import hashlib

XSRF_COOKIE = "_streamlit_xsrf"


def browser_key(xsrf_cookie: str | None) -> str | None:
    """The participant key of a browser from its XSRF cookie's value; None when there is none or it is not one."""
    parts = (xsrf_cookie or "").strip("\"'").split("|")
    if len(parts) != 4 or parts[0] != "2":
        return None
    try:
        mask, masked = binascii.a2b_hex(parts[1]), binascii.a2b_hex(parts[2])
    except (binascii.Error, ValueError):
        return None
    if not mask or not masked:
        return None
    token = bytes(byte ^ mask[i % len(mask)] for i, byte in enumerate(masked))
    return "browser-" + hashlib.sha256(b"tev participant " + token).hexdigest()[:24]
