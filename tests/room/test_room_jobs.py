"""Background jobs: locked without the host secret, a global cap, owners, found again after a restart."""

from __future__ import annotations

import sys
import time

import pytest

from tevcore.room.jobs import HOST, JobBoard, JobRefused, _same_process_alive

SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.fixture
def board(tmp_path):
    made = []

    def make(cap=1, secret="s3cret"):
        made.append(JobBoard(tmp_path / "jobs.json", cap, secret))
        return made[-1]

    yield make
    for each in made:
        each.end_all(wait_s=5)


def test_jobs_are_locked_until_the_host_secret_unlocks_them(board, tmp_path):
    jobs = board()
    assert not jobs.unlock("wrong", guesser="p1") and jobs.unlock("s3cret", guesser="host")
    assert not board(secret=None).unlock("")
    with pytest.raises(JobRefused, match="host's: enter the host secret"):
        jobs.start("p1", "train", tmp_path / "run", SLEEP, tmp_path / "run" / "log", unlocked=False)


def test_fifty_starts_run_one_job_and_refuse_the_rest(board, tmp_path):
    jobs = board(cap=1)
    started, refused = [], []
    for i in range(50):
        try:
            started.append(jobs.start(f"p{i}", "train", tmp_path / f"run{i}", SLEEP, tmp_path / f"run{i}.log",
                                      unlocked=True))
        except JobRefused as err:
            refused.append(str(err))
    assert len(started) == 1 and len(refused) == 49 and len(jobs.running()) == 1
    assert "at most 1 job at once" in refused[0]


def test_only_the_starter_or_the_host_stops_or_resumes_a_job(board, tmp_path):
    jobs = board(cap=2)
    job = jobs.start("alice", "train", tmp_path / "run", SLEEP, tmp_path / "log", unlocked=True)
    with pytest.raises(JobRefused, match="only whoever started this job, or the host"):
        jobs.stop(job, "bob", is_host=False)
    assert job.running
    with pytest.raises(JobRefused, match="already has a running train job"):
        jobs.start("alice", "train", tmp_path / "run", SLEEP, tmp_path / "log", unlocked=True)
    jobs.stop(job, "alice", is_host=False)
    deadline = time.time() + 10
    while job.running and time.time() < deadline:
        time.sleep(0.05)
    assert not job.running
    with pytest.raises(JobRefused, match="started by another participant"):
        jobs.start("bob", "train", tmp_path / "run", SLEEP, tmp_path / "log", unlocked=True)
    again = jobs.start("host-person", "train", tmp_path / "run", SLEEP, tmp_path / "log", unlocked=False,
                       is_host=True)
    assert again.owner == HOST
    jobs.stop(again, "bob", is_host=True)


def test_a_restarted_server_finds_its_running_jobs_again(board, tmp_path):
    first = board(cap=1)
    job = first.start("alice", "data", tmp_path / "set", SLEEP, tmp_path / "log", unlocked=True)
    deadline = time.time() + 10  # a restart comes later than the child's exec (its /proc command line)
    while not _same_process_alive(job.pid, SLEEP) and time.time() < deadline:
        time.sleep(0.01)
    second = board(cap=1)
    found = second.running()
    assert [(j.id, j.pid, j.owner, j.found_again) for j in found] == [(job.id, job.pid, "alice", True)]
    with pytest.raises(JobRefused, match="at most 1 job"):
        second.start("bob", "data", tmp_path / "other", SLEEP, tmp_path / "log2", unlocked=True)
    second.stop(found[0], "alice", is_host=False)  # a data build can be stopped, by its starter
    deadline = time.time() + 10
    while found[0].running and time.time() < deadline:
        time.sleep(0.05)
    assert not found[0].running


def test_the_server_ending_ends_its_jobs(board, tmp_path):
    jobs = board(cap=2)
    started = [jobs.start("p", "train", tmp_path / f"r{i}", SLEEP, tmp_path / f"l{i}", unlocked=True)
               for i in range(2)]
    jobs.end_all(wait_s=10)
    assert not any(job.running for job in started) and jobs.running() == []


def test_two_live_servers_on_one_registry_keep_each_others_jobs_recorded(board, tmp_path):
    """Two servers on one runs folder (two apps of one user): each one's save keeps the other's running jobs, so a
    third server started later finds both."""
    first, second = board(cap=2), board(cap=2)
    a = first.start("p", "train", tmp_path / "a", SLEEP, tmp_path / "la", unlocked=True)
    b = second.start("p", "train", tmp_path / "b", SLEEP, tmp_path / "lb", unlocked=True)
    deadline = time.time() + 10  # (a record is b's once its process runs b's command line)
    while not all(_same_process_alive(job.pid, SLEEP) for job in (a, b)) and time.time() < deadline:
        time.sleep(0.01)
    first.start("p", "train", tmp_path / "c", SLEEP, tmp_path / "lc", unlocked=True)  # saved after b's start
    assert {job.folder for job in board(cap=2).running()} == {str((tmp_path / name).resolve()) for name in "abc"}
