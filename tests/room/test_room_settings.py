"""Room settings from the environment and the host's TOML file."""

from __future__ import annotations

import pytest

from tevcore.room.limits import ROOM, SINGLE_USER
from tevcore.room.settings import default_slots, load_settings


def test_without_the_room_switch_the_single_user_profile_runs():
    settings = load_settings({})
    assert not settings.room and settings.limits == SINGLE_USER and settings.host_secret is None


def test_the_room_reads_the_hosts_file_and_secret(tmp_path):
    config = tmp_path / "room.toml"
    config.write_text('targets = ["default"]\ndrafters = ["rollout"]\ncompute_slots = 3\nspace_ttl_minutes = 30\n'
                      '[caps]\nbudget = 16\n')
    settings = load_settings({"TEV_ROOM": "1", "TEV_ROOM_CONFIG": str(config), "TEV_ROOM_SECRET": "s3"})
    assert settings.room and settings.limits.budget == 16 and settings.limits.draws == ROOM.draws
    assert settings.targets == ("default",) and settings.drafters == ("rollout",)
    assert settings.compute_slots == 3 and settings.space_ttl_s == 1800 and settings.host_secret == "s3"


@pytest.mark.parametrize("text, message", [
    ("budget = 3\n", "unknown settings budget"),
    ("[caps]\nbudgett = 3\n", "no cap named budgett"),
    ("compute_slots = 0\n", "compute_slots must be a positive"),
    ("targets = []\n", "targets must be a non-empty list"),
    ("targets = [\n", "cannot be read"),
])
def test_a_bad_room_file_is_refused_in_one_line(tmp_path, text, message):
    config = tmp_path / "room.toml"
    config.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_settings({"TEV_ROOM": "1", "TEV_ROOM_CONFIG": str(config)})


def test_the_default_slots_are_what_the_cores_hold():
    assert default_slots(2, 1) == 2 and default_slots(16, 4) == 4 and default_slots(2, 4) == 1
    assert default_slots(None, 1) == 1
