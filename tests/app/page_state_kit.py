"""A page's one state object in an AppTest's session, where `room_ui.page_state` finds it (no server store)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from workshop_state import WorkshopSession


def page_state_key(kind: type) -> str:
    """The session-state entry `room_ui.page_state(kind)` keeps its object under."""
    return f"page_state:{kind.__module__}.{kind.__qualname__}"


def put_workshop(at: AppTest, state: WorkshopSession) -> WorkshopSession:
    """The workshop's state as the page left it (edits made before a page switch)."""
    at.session_state[page_state_key(WorkshopSession)] = state
    return state
