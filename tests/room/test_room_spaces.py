"""Participant spaces: private random folders, plain names only, removed at session end or when idle."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tevcore.room.spaces import SpaceKeeper, plain_name, space_root_problem


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", "a/b", ".hidden", "..", "", "a..b", "x" * 101, "a\\b"])
def test_anything_but_a_plain_file_name_is_refused(name):
    with pytest.raises(ValueError, match="not a plain file name"):
        plain_name(name)


def test_two_participants_get_separate_unguessable_spaces_and_names_stay_inside(tmp_path):
    keeper = SpaceKeeper(tmp_path / "spaces", ttl_s=60)
    mine, theirs = keeper.open(), keeper.open()
    assert mine.folder != theirs.folder and len(mine.folder.name) == 32
    mine.path("trace.jsonl").write_text("x")
    assert mine.files() == [mine.folder / "trace.jsonl"] and theirs.files() == []
    with pytest.raises(ValueError):
        mine.path(f"../{theirs.folder.name}/trace.jsonl")


def test_a_space_goes_when_its_session_drops_it(tmp_path):
    keeper = SpaceKeeper(tmp_path / "spaces", ttl_s=60)
    session = {"space": keeper.open()}
    folder = session["space"].folder
    session["space"].path("a.jsonl").write_text("x")
    session.clear()
    gc.collect()
    assert not folder.exists()


def test_an_idle_space_and_a_gone_servers_spaces_are_swept(tmp_path):
    now = [0.0]
    earlier = SpaceKeeper(tmp_path / "spaces", ttl_s=60)
    left = earlier.open()
    left.path("a.jsonl").write_text("x")
    earlier_folder = earlier.folder
    left._finalizer.detach()  # the server died with the session still open: its space stays on disk
    del earlier, left
    gc.collect()
    keeper = SpaceKeeper(tmp_path / "spaces", ttl_s=60, clock=lambda: now[0])
    idle, busy = keeper.open(), keeper.open()
    now[0] = 50
    keeper.touch(busy)
    now[0] = 100
    assert sorted(keeper.sweep()) == sorted([idle.folder, earlier_folder])
    assert not idle.folder.exists() and busy.folder.exists() and not keeper.alive(idle) and keeper.alive(busy)
    assert not earlier_folder.exists()


# ---------------------------------------------------------------- issue 51: a sweep removes only the room's own

def test_a_sweep_leaves_what_the_room_did_not_make(tmp_path):
    """The old sweep removed every folder under the root it did not know: a host's folder put there, and a runs
    folder set to the same place."""
    root = tmp_path / "spaces"
    keeper = SpaceKeeper(root, ttl_s=60)
    hosts = root / "notes"
    hosts.mkdir()
    (hosts / "keep.txt").write_text("mine")
    runs = root / "runs"
    (runs / "run-1").mkdir(parents=True)
    (runs / "run-1" / "status.json").write_text("{}")
    lookalike = root / "server-0123456789abcdef"  # named like a server folder, but no server's (no lock)
    lookalike.mkdir()
    assert keeper.sweep() == []
    assert (hosts / "keep.txt").read_text() == "mine" and (runs / "run-1" / "status.json").is_file()
    assert lookalike.is_dir()


def test_a_second_rooms_live_spaces_survive_the_first_rooms_sweep(tmp_path):
    first, second = SpaceKeeper(tmp_path / "spaces", ttl_s=60), SpaceKeeper(tmp_path / "spaces", ttl_s=60)
    theirs = second.open()
    theirs.path("trace.jsonl").write_text("x")
    assert first.sweep() == []
    assert (theirs.folder / "trace.jsonl").read_text() == "x" and second.alive(theirs)


@pytest.mark.parametrize("root", ["/", "/tmp", "/etc", "~"])
def test_a_system_folder_is_refused_as_the_space_root(root):
    with pytest.raises(ValueError, match="is a system folder"):
        SpaceKeeper(Path(root).expanduser(), ttl_s=60)
    assert space_root_problem(Path(root).expanduser()) is not None


def test_a_folder_holding_other_data_or_a_file_is_refused_and_left_as_it_was(tmp_path):
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("a")
    before = sorted(p.name for p in (tmp_path / "data").iterdir())
    with pytest.raises(ValueError, match="holds other data"):
        SpaceKeeper(tmp_path / "data", ttl_s=60)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == before
    with pytest.raises(ValueError, match="is a file, not a folder"):
        SpaceKeeper(tmp_path / "data" / "a.txt", ttl_s=60)


def test_the_runs_folder_may_not_hold_the_spaces_nor_lie_inside_them(tmp_path):
    for root, runs in ((tmp_path / "runs", tmp_path / "runs"), (tmp_path / "runs" / "spaces", tmp_path / "runs"),
                       (tmp_path / "spaces", tmp_path / "spaces" / "runs")):
        assert "overlap" in space_root_problem(root, runs)
    assert space_root_problem(tmp_path / "spaces", tmp_path / "runs") is None


def test_an_empty_folder_is_adopted_and_a_room_root_is_reused(tmp_path):
    (tmp_path / "empty").mkdir()
    first = SpaceKeeper(tmp_path / "empty", ttl_s=60)
    assert space_root_problem(tmp_path / "empty") is None  # marked: a later server may use it
    SpaceKeeper(tmp_path / "empty", ttl_s=60).open()
    assert first.open().folder.is_dir()
