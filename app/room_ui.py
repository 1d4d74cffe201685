"""The room's services (tevcore.room) as the pages use them: one object each per server, one participant per
browser session, and the few widgets that differ in a hosted room.

Without `TEV_ROOM` the single-user profile runs: generous caps, paths typed freely, jobs unlocked. With it (what
`bash scripts/app.sh --room` sets), targets and drafters come from the host's list, a participant's files live in
their own space, model work waits its turn in the server's one compute queue, and training and data builds are
the host's until the host's secret unlocks them for this session.
"""

from __future__ import annotations

import atexit
import secrets
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from tevcore.room import guarded
from tevcore.room.jobs import JobBoard
from tevcore.room.limits import Limits
from tevcore.room.queue import ComputeQueue, Replaced
from tevcore.room.secret import TooManyGuesses
from tevcore.room.settings import RoomSettings, load_settings
from tevcore.room.spaces import Space, SpaceKeeper, plain_name  # noqa: F401 (the pages' name check)
from tevcore.room.training import REGISTRY, Caller, TrainingControl
from tevcore.studio import participants, reader
from tevcore.studio.page_states import PageStates, State, state_key
from tevcore.studio.turns import Left, Seat, queue_turn

ss = st.session_state


@st.cache_resource(show_spinner=False)
def settings() -> RoomSettings:
    return load_settings()


def in_room() -> bool:
    return settings().room


def limits() -> Limits:
    return settings().limits


@st.cache_resource(show_spinner=False)
def compute_queue() -> ComputeQueue:
    return ComputeQueue(settings().compute_slots)


@st.cache_resource(show_spinner=False)
def _keeper() -> SpaceKeeper:
    keeper = SpaceKeeper(settings().space_root, settings().space_ttl_s)
    keeper.sweep()  # an earlier server's spaces
    return keeper


@st.cache_resource(show_spinner=False)
def _training(root: str) -> TrainingControl:
    board = JobBoard(Path(root) / REGISTRY, limits().jobs, settings().host_secret)
    if in_room():  # a room's jobs end with its server; on one's own machine they are found again at the next start
        atexit.register(board.end_all)
    return TrainingControl(board, limits())


def training(root: Path) -> TrainingControl:
    """The trainings and data builds of the runs folder `root` (a room has one: the host's)."""
    return _training(str(Path(root).resolve()))


def job_board() -> JobBoard:
    """The room's jobs: the board of the host's runs folder."""
    return training(settings().runs).board


def participant() -> str:
    """This browser session's key (the owner of its queue requests and jobs); never shown, never typed."""
    return ss.setdefault("room_who", secrets.token_hex(12))


def queue_owner() -> str:
    """Who a queue request belongs to: the browser (one key in all its tabs: `tevcore.studio.participants`), else
    this session. The queue runs one turn per owner at a time and keeps one request of theirs in line."""
    return participants.browser_key(st.context.cookies.get(participants.XSRF_COOKIE)) or participant()


@st.cache_resource(show_spinner=False)
def _page_states() -> PageStates:
    return PageStates()


def page_state(kind: type[State]) -> State:
    """This participant's one state object for a page (`tevcore.studio.page_states`): the same object after a
    page switch and, through the browser key, after a reload of the page; every tab of the browser shares it."""
    name = state_key(kind)
    if name not in ss:
        ss[name] = _page_states().get(queue_owner(), kind)
    return ss[name]


@st.cache_resource(show_spinner=False)
def _browser_spaces() -> weakref.WeakValueDictionary:
    """The space each browser's sessions share, by browser key; held weakly: a space goes when its last session
    does (or when it idles past the time to live)."""
    return weakref.WeakValueDictionary()


def space() -> Space:
    """This participant's own folder: one for all tabs of their browser, so a reload of the page (a new session)
    finds the traces saved before; a new one when it was removed after idling. Without a browser key (see
    `queue_owner`) each session has its own."""
    keeper = _keeper()
    keeper.sweep()
    current = ss.get("room_space")
    if current is None or not keeper.alive(current):
        browser = participants.browser_key(st.context.cookies.get(participants.XSRF_COOKIE))
        shared = _browser_spaces().get(browser) if browser else None
        current = ss["room_space"] = shared if shared is not None and keeper.alive(shared) else keeper.open()
        if browser:
            _browser_spaces()[browser] = current
    keeper.touch(current)
    return current


def space_note() -> str:
    """Where a participant's saved files live and when they go, in one line for the page."""
    minutes = settings().space_ttl_s / 60
    return (f"Saved traces live in your own space on this server: kept across reloads and tabs of this browser, "
            f"removed a few minutes after its last tab closes, after {minutes:g} idle minutes, or when the server "
            "restarts. Download what you want to keep.")


def refused(err: ValueError) -> None:
    """Say why a request was refused, in one line, and end this script run (nothing was started)."""
    st.error(f"Refused: {err}")
    st.stop()


def check(call, *args) -> None:
    """Run one of `tevcore.room.guarded`'s checks with this server's limits; a refusal (a cap, a name that is not
    a plain file name) ends the run with its line."""
    try:
        call(limits(), *args)
    except ValueError as err:
        refused(err)


def _page_check():
    """A check the studio's services call between units of work: `Left` once this page's browser tab is gone
    (its session no longer active), so the work stops and its queue slot is freed."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx()
    if context is None or not runtime.exists():  # a bare script run (AppTest): nobody can leave
        return lambda: None
    server, session_id = runtime.get_instance(), context.session_id

    def still_here() -> None:
        if not server.is_active_session(session_id):
            raise Left("the page that asked was closed")
    return still_here


@contextmanager
def seat() -> Iterator[Seat]:
    """This participant's seat for the studio's services: the server's caps and queue, their key, their place
    in line shown while waiting. A newer request of theirs takes this one's place (this run then ends quietly);
    a closed tab ends the run."""
    box = st.empty()
    asking = Seat(limits(), compute_queue(), queue_owner(), on_wait=lambda place: box.info(place.text()),
                  still_here=_page_check())
    try:
        yield asking
    except Replaced:
        box.info("This request was replaced by your newer one.")
        st.stop()
    except Left:
        st.stop()
    except BaseException:
        box.empty()
        raise
    box.empty()


@contextmanager
def compute_turn() -> Iterator[Callable[[], None]]:
    """Hold one of the server's compute slots for the block (a page's own model work), as the studio's services
    do: the place in line shows while waiting. Yields the check to call between units of work (`Left` once this
    tab is closed: the block ends and the slot is freed)."""
    with seat() as asking, queue_turn(asking):
        yield asking.still_here


def target_input(label: str, default: str, key: str, help: str) -> str:
    """The target: the host's list in a room, free text (a hub id, a folder, a .gguf) on one's own machine."""
    if in_room():
        return st.selectbox(label, settings().targets, key=key, help="the targets this room's host offers")
    return st.text_input(label, value=default, key=key, help=help).strip()


def drafter_options(options: list[str]) -> list[str]:
    """The drafters offered: the host's list in a room, else `options`."""
    return list(settings().drafters) if in_room() else options


def read_upload(data: bytes, name: str) -> reader.Upload:
    """An uploaded file under this server's byte caps (the studio's one reader); a one-line CapExceeded."""
    return reader.read_upload(limits(), data, name)


def read_file(path: Path, name: str | None = None) -> reader.Upload:
    """A file on the server's disk under this server's byte caps (the studio's one reader)."""
    return reader.read_file(limits(), path, name)


def is_host() -> bool:
    """Whether this session is the host's: everyone on their own machine; in a room, once the secret was given."""
    return not in_room() or bool(ss.get("room_host"))


def host_secret_box(label: str, key: str, help: str | None = None) -> bool:
    """Whether this session is the host's, drawing the secret box where it is not yet (entered once per session).

    Each typed guess is checked once, not on every rerun, and through the board's limit on wrong guesses."""
    if is_host():
        return True
    secret = st.text_input(label, type="password", key=key, help=help)
    if secret and ss.get("room_secret_tried") != secret:
        try:
            right = job_board().unlock(secret, guesser=queue_owner())
        except TooManyGuesses as err:  # not checked: the same guess is taken once the wait is over
            st.error(f"Refused: {err}")
            return False
        ss.room_secret_tried = secret
        if right:
            ss.room_host = True
            st.rerun()
    if secret and not ss.get("room_host"):
        st.error("Refused: that is not the host secret.")
    return False


def jobs_allowed() -> bool:
    """Whether this session may use the training page: the host, or anyone once the host opened jobs to the room.

    In a room, a host-secret box is drawn for the others.
    """
    if host_secret_box("host secret (training and data builds are the host's)", "room_secret"):
        return True
    return job_board().open_to_participants


def host_controls() -> None:
    """The host's switch that lets participants start jobs of their own (under the server's cap)."""
    if in_room() and is_host():
        board = job_board()
        for job in board.running():
            st.caption(f"running: {job.kind} job in {Path(job.folder).name} (process {job.pid}"
                       f"{', found again after a server restart' if job.found_again else ''})")
        board.open_to_participants = st.toggle("let participants start training and data builds (at most "
                                               f"{board.cap} job{'s' if board.cap != 1 else ''} at once, server-wide)",
                                               value=board.open_to_participants, key="room_open_jobs")


def caller() -> Caller:
    """This session as the training service sees it: its owner key, and whether it speaks for the host."""
    return Caller(participant(), is_host())
