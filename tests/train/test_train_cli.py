"""What `train` says when it is stopped: the step it goes on from, which is the last checkpoint's, not the last
step run (the steps after the checkpoint run again)."""
import json

from tevcore.train.train_cli import stop_line


def _folder(tmp_path, step: int, checkpoint: int | None):
    (tmp_path / "status.json").write_text(json.dumps({"state": "interrupted", "step": step}))
    if checkpoint is not None:
        (tmp_path / "latest.json").write_text(json.dumps({"checkpoint": f"checkpoint-{checkpoint}", "step": checkpoint}))
    return tmp_path


def test_a_stop_between_checkpoints_names_the_step_the_run_goes_on_from(tmp_path):
    assert stop_line(_folder(tmp_path, 149, 100), 300) == (
        "stopped after step 149 of 300; the same command resumes it from its last checkpoint, step 100")


def test_a_stop_before_the_first_checkpoint_says_the_run_starts_again(tmp_path):
    assert stop_line(_folder(tmp_path, 149, None), 300) == (
        "stopped after step 149 of 300; the same command resumes it from step 0: no checkpoint was saved yet")


def test_a_stop_at_a_checkpoint_loses_no_step(tmp_path):
    assert stop_line(_folder(tmp_path, 150, 150), 300) == "stopped after step 150 of 300; the same command resumes it"
