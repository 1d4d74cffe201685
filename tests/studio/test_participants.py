"""One participant key for all tabs of one browser: the XSRF token under a fresh mask per page load."""

from __future__ import annotations

import binascii

from tevcore.studio.participants import browser_key


def cookie(token: bytes, mask: bytes, stamp: int = 1796575999) -> str:
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(token))
    return f"2|{binascii.b2a_hex(mask).decode()}|{binascii.b2a_hex(masked).decode()}|{stamp}"


def test_two_tabs_of_one_browser_share_a_key_and_another_browser_has_its_own():
    token = bytes(range(16))
    tab_1, tab_2 = cookie(token, b"\x01\x02\x03\x04"), cookie(token, b"\xf0\x0f\xaa\x55")
    assert tab_1 != tab_2 and browser_key(tab_1) == browser_key(tab_2) is not None
    assert browser_key(cookie(bytes(range(1, 17)), b"\x01\x02\x03\x04")) != browser_key(tab_1)
    assert token.hex() not in browser_key(tab_1)


def test_no_cookie_or_a_foreign_one_gives_no_key():
    assert browser_key(None) is None and browser_key("") is None
    assert browser_key("1|abc") is None and browser_key("2|zz|zz|1") is None
