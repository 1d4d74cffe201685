"""Results are written one way: a temporary file per writer, published atomically, never over another result.

Two writers of one output at once both keep their result (one beside the
other) or, when replacing is asked for, one whole result wins: never a
mixture, never a lost result reported as written. Every command that writes a
result refuses to start over an existing one without --force.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest

from tevcore.cli import main
from tevcore.engine.records import read_trace, write_trace
from tevcore.outputs import beside, check_not_replacing, write_json, write_output


def _racing_writers(path: Path, texts: list[str], overwrite: bool) -> list[Path]:
    """Write each text to `path` from its own thread; every writer holds its temporary file open at once."""
    barrier = threading.Barrier(len(texts))
    temporaries, results, errors = [], [None] * len(texts), []

    def writer(index: int) -> None:
        def write(tmp: Path) -> None:
            temporaries.append(tmp)
            tmp.write_text(texts[index][: len(texts[index]) // 2])
            barrier.wait(timeout=20)  # every writer is half-way through its own file
            tmp.write_text(texts[index])

        try:
            results[index] = write_output(path, write, overwrite)
        except BaseException as err:  # noqa: BLE001 - reported by the test below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(temporaries)) == len(texts)  # no two writers shared a temporary file
    return results


@pytest.mark.parametrize("writers", [2, 5])
def test_writers_racing_for_one_output_each_keep_their_whole_result(tmp_path, writers):
    path = tmp_path / "bench.json"
    texts = [json.dumps({"writer": i, "rows": list(range(50 * (i + 1)))}) for i in range(writers)]
    results = _racing_writers(path, texts, overwrite=False)
    assert len(set(results)) == writers and path in results
    assert sorted(p.read_text() for p in results) == sorted(texts)  # each result whole, none lost
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in results)  # no temporary left


def test_writers_racing_with_overwrite_leave_one_whole_result(tmp_path):
    path = tmp_path / "trace.jsonl"
    texts = ["a" * 1000, "b" * 3000, "c" * 2000]
    results = _racing_writers(path, texts, overwrite=True)
    assert results == [path] * 3
    assert path.read_text() in texts  # one writer's result, not a mixture
    assert [p.name for p in tmp_path.iterdir()] == ["trace.jsonl"]


def test_an_output_that_exists_is_never_replaced_unless_asked(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text("the first run")
    second = write_json(path, {"run": 2})
    assert second == tmp_path / "eval-2.json" and path.read_text() == "the first run"
    assert write_json(path, {"run": 3}) == tmp_path / "eval-3.json"
    assert write_json(path, {"run": 4}, overwrite=True) == path and json.loads(path.read_text()) == {"run": 4}


@pytest.mark.parametrize("failure", [RuntimeError("disk trouble"), KeyboardInterrupt()])
def test_a_write_that_fails_or_is_interrupted_leaves_nothing_and_keeps_the_old_result(tmp_path, failure):
    path = tmp_path / "trace.jsonl"
    path.write_text("kept")

    def write(tmp: Path) -> None:
        tmp.write_text("half")
        raise failure

    with pytest.raises(type(failure)):
        write_output(path, write, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["trace.jsonl"] and path.read_text() == "kept"


def test_a_result_gets_the_usual_file_mode_not_the_temporary_files(tmp_path):
    mask = os.umask(0o022)
    try:
        path = write_json(tmp_path / "r.json", {})
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("name, expected", [("bench.json", "bench-2.json"), ("t.jsonl.gz", "t-2.jsonl.gz"),
                                            ("notes", "notes-2"), ("run.v1.json", "run.v1-2.json")])
def test_a_result_beside_another_keeps_its_kind_of_name(tmp_path, name, expected):
    assert beside(tmp_path / name) == tmp_path / expected
    (tmp_path / expected).write_text("")
    assert beside(tmp_path / name).name == expected.replace("-2", "-3")


def test_a_trace_written_twice_keeps_both_and_gzip_survives_the_temporary_name(tmp_path, capsys):
    from test_bad_inputs import _record

    path = tmp_path / "t.jsonl.gz"
    first = write_trace(path, [_record(0)], {"run": 1})
    second = write_trace(path, [_record(0), _record(1)], {"run": 2})
    assert (first, second) == (path, tmp_path / "t-2.jsonl.gz")
    gzip.decompress(second.read_bytes())  # gzip by the target's name, not the temporary's
    assert read_trace(first).meta == {"run": 1} and len(read_trace(second).rounds) == 2


def test_check_not_replacing_names_the_flag_and_the_way_out(tmp_path):
    path = tmp_path / "b.json"
    check_not_replacing(path, "--out", force=False)  # nothing there yet
    path.write_text("{}")
    with pytest.raises(ValueError, match=f"--out {path} already exists: pass --force to replace it"):
        check_not_replacing(path, "--out", force=False)
    check_not_replacing(path, "--out", force=True)


# ---------------------------------------------------------------- every command that writes a result
EXISTING = [
    ("round", ["--prompt", "hi", "--out", "{dir}/t.jsonl"], "t.jsonl"),
    ("generate", ["--prompt", "hi", "--out", "{dir}/t.jsonl.gz"], "t.jsonl.gz"),
    ("bench", ["--out", "{dir}/b.json"], "b.json"),
    ("bench-verifiers", ["--out", "{dir}/v.json"], "v.json"),
    ("rounds-at-context", ["--prompt", "hi", "--out", "{dir}/r.json"], "r.json"),
    ("eval-drafter", ["--json", "{dir}/e.json"], "e.json"),
    ("compare", ["{dir}", "--data", "{dir}"], "compare.json"),
]


@pytest.mark.parametrize("command, flags, name", EXISTING, ids=[c for c, _, _ in EXISTING])
def test_every_command_refuses_to_start_over_an_existing_result(command, flags, name, tmp_path, capsys):
    (tmp_path / name).write_text("the first run's result")
    code = main([command] + [flag.replace("{dir}", str(tmp_path)) for flag in flags])
    err = capsys.readouterr().err
    assert code == 2 and "already exists: pass --force to replace it" in err and name in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert (tmp_path / name).read_text() == "the first run's result"


def test_force_replaces_a_trace_with_the_new_run(tiny_model_folder, tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    out.write_text("the first run's result")
    code = main(["generate", "--prompt", "hi", "--target", str(tiny_model_folder("llama")), "--proposer", "rollout",
                 "--device", "cpu", "--max-new-tokens", "4", "--out", str(out), "--force"])
    assert code == 0 and f"wrote {out}\n" in capsys.readouterr().err
    assert read_trace(out).rounds and [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_a_full_disk_while_writing_a_result_is_one_line_naming_it_and_keeps_the_old_one(tmp_path):
    import errno

    path = tmp_path / "trace.jsonl"
    path.write_text("kept")

    def write(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=f"^cannot write {path}: No space left on device \\(.* free there\\)"):
        write_output(path, write, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["trace.jsonl"] and path.read_text() == "kept"
