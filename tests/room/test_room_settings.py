"""Room settings from the environment and the host's TOML file."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tevcore.room.limits import ROOM, SINGLE_USER
from tevcore.room.settings import default_slots, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_without_the_room_switch_the_single_user_profile_runs():
    settings = load_settings({})
    assert not settings.room and settings.limits == SINGLE_USER and settings.host_secret is None


def test_the_room_reads_the_hosts_file_and_secret(tmp_path):
    config = tmp_path / "room.toml"
    config.write_text(f'space_root = "{tmp_path / "spaces"}"\ntargets = ["default"]\ndrafters = ["rollout"]\n'
                      'compute_slots = 3\nspace_ttl_minutes = 30\n[caps]\nbudget = 16\nsession_bytes = 67108864\n')
    settings = load_settings({"TEV_ROOM": "1", "TEV_ROOM_CONFIG": str(config), "TEV_ROOM_SECRET": "s3"})
    assert settings.room and settings.limits.budget == 16 and settings.limits.draws == ROOM.draws
    assert settings.limits.session_bytes == 64 << 20  # the memory budget per request, like every cap
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


# ---------------------------------------------------------------- issue 51: wrong types refused, never coerced

def _room(tmp_path, text: str, **env: str) -> dict:
    config = tmp_path / "room.toml"
    config.write_text(text)
    return {"TEV_ROOM": "1", "TEV_ROOM_CONFIG": str(config), **env}


@pytest.mark.parametrize("text, message", [
    ("compute_slots = true\n", "compute_slots must be a positive whole number, got True"),
    ("compute_slots = 2.0\n", "compute_slots must be a positive whole number, got 2.0"),
    ("space_ttl_minutes = nan\n", "space_ttl_minutes must be a positive finite number, got nan"),
    ("space_ttl_minutes = inf\n", "space_ttl_minutes must be a positive finite number, got inf"),
    ("space_ttl_minutes = true\n", "space_ttl_minutes must be a positive finite number, got True"),
    ("space_ttl_minutes = \"2\"\n", "space_ttl_minutes must be a positive finite number, got '2'"),
    ("runs = 123\n", "runs must be a folder path \\(a quoted string\\), got 123"),
    ("space_root = [\"a\"]\n", "space_root must be a folder path \\(a quoted string\\), got \\['a'\\]"),
    ("space_root = \"\"\n", "space_root must be a folder path"),
    ("[caps]\nbudget = true\n", "caps must be positive whole numbers: budget"),
])
def test_a_room_setting_of_the_wrong_type_or_value_is_refused_naming_the_key(tmp_path, text, message):
    spaces = f'space_root = "{tmp_path / "spaces"}"\n' if "space_root" not in text else ""
    with pytest.raises(ValueError, match=message):
        load_settings(_room(tmp_path, spaces + text))


@pytest.mark.parametrize("value", ["two", "1.5", "0", "-3"])
def test_a_bad_thread_count_names_its_environment_variable(tmp_path, value):
    env = _room(tmp_path, f'space_root = "{tmp_path / "spaces"}"\n', TEV_APP_THREADS=value)
    with pytest.raises(ValueError, match=f"the environment variable TEV_APP_THREADS must be a whole number >= 1, "
                                         f"got '{value}'"):
        load_settings(env)


def test_spaces_at_root_a_system_folder_the_runs_folder_or_other_data_are_refused(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "thesis.tex").write_text("years of work")
    for text, message in (('space_root = "/"\n', "is a system folder"),
                          ('space_root = "/usr"\n', "is a system folder"),
                          (f'space_root = "{tmp_path / "runs"}"\nruns = "{tmp_path / "runs"}"\n', "overlap"),
                          (f'space_root = "{tmp_path / "full"}"\n', "holds other data")):
        with pytest.raises(ValueError, match=message):
            load_settings(_room(tmp_path, text))
    with pytest.raises(ValueError, match="is a system folder"):
        load_settings({"TEV_ROOM": "1", "TEV_ROOM_SPACES": "/"})
    assert (tmp_path / "full" / "thesis.tex").read_text() == "years of work"


def _app_sh_python(tmp_path: Path) -> dict:
    """An environment in which scripts/app.sh finds an installed Python without installing anything: a virtual
    environment of this interpreter whose install stamp is current, seeing this checkout and its packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    stamp = hashlib.sha256(b"".join((REPO / name).read_bytes() for name in
                                    ("requirements.txt", "pyproject.toml", "scripts/install.sh"))).hexdigest()
    (venv / ".tevcore-installed").write_text(f"{stamp} {REPO}\n")
    paths = [str(REPO), *(p for p in sys.path if p.endswith("site-packages"))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEV")}
    return dict(env, VIRTUAL_ENV=str(venv), PYTHONPATH=os.pathsep.join(paths), TEV_ROOM_SECRET="s")


@pytest.mark.parametrize("text, extra, message", [
    ("runs = 123\n", {}, "room setting runs must be a folder path"),
    ('space_root = ["a"]\n', {}, "room setting space_root must be a folder path"),
    ("colour = \"red\"\n", {}, "has unknown settings colour"),
    ("", {"TEV_APP_THREADS": "many"}, "the environment variable TEV_APP_THREADS must be a whole number"),
    ("", {"TEV_ROOM_PORT": "http"}, "the environment variable TEV_ROOM_PORT must be a whole number"),
    ("", {"TEV_APP_DEVICE": "gpu"}, "the environment variable TEV_APP_DEVICE: unknown device 'gpu'"),
    ('space_root = "/"\n', {}, "space_root / is a system folder"),
])
def test_app_sh_room_refuses_bad_settings_in_one_line_before_the_server(tmp_path, text, extra, message):
    config = tmp_path / "room.toml"
    spaces = f'space_root = "{tmp_path / "spaces"}"\n' if "space_root" not in text else ""
    config.write_text(spaces + text)
    env = dict(_app_sh_python(tmp_path), TEV_ROOM_CONFIG=str(config), **extra)
    done = subprocess.run(["bash", str(REPO / "scripts" / "app.sh"), "--room"], env=env, capture_output=True,
                          text=True, timeout=120)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in done.stderr and "streamlit" not in done.stdout.lower()
    assert len(errors) == 1 and errors[0].startswith("error: ") and message in errors[0], done.stderr
