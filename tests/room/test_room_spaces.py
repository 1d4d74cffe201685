"""Participant spaces: private random folders, plain names only, removed at session end or when idle."""

from __future__ import annotations

import gc

import pytest

from tevcore.room.spaces import SpaceKeeper, plain_name


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


def test_an_idle_space_and_an_earlier_servers_leftover_are_swept(tmp_path):
    now = [0.0]
    keeper = SpaceKeeper(tmp_path / "spaces", ttl_s=60, clock=lambda: now[0])
    idle, busy = keeper.open(), keeper.open()
    leftover = tmp_path / "spaces" / "old"
    leftover.mkdir()
    now[0] = 50
    keeper.touch(busy)
    now[0] = 100
    assert sorted(keeper.sweep()) == sorted([idle.folder, leftover])
    assert not idle.folder.exists() and busy.folder.exists() and not keeper.alive(idle) and keeper.alive(busy)
