"""`tevcore.ranks.leave`: a command that joined a torchrun process group leaves it once it has succeeded.

A gloo group left to the interpreter's shutdown can abort a finished rank
(SIGABRT, 'terminate called without an active exception'), which failed a
torchrun eval-drafter run; a failed rank keeps its group, since the others may
still be inside a collective with it.
"""

from __future__ import annotations

import socket
import sys
import types

import pytest
import torch.distributed as dist

from tevcore import cli


@pytest.fixture
def one_rank_group(monkeypatch):
    """A one-process gloo group, as `tevcore.ranks.world` joins one under torchrun."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _command(monkeypatch, run) -> None:
    """A subcommand `ranked` whose module imported tevcore.ranks, as bench, train and eval-drafter do."""
    import tevcore.ranks  # noqa: F401

    module = types.ModuleType("ranked_command")
    module.add_arguments, module.run = (lambda parser: None), run
    monkeypatch.setitem(sys.modules, "ranked_command", module)
    monkeypatch.setitem(cli.COMMANDS, "ranked", ("ranked_command", "a command run under torchrun"))


def test_a_command_that_succeeded_leaves_its_process_group(one_rank_group, monkeypatch):
    _command(monkeypatch, lambda args: 0)
    assert dist.is_initialized()
    assert cli.main(["ranked"]) == 0
    assert not dist.is_initialized()


def test_a_command_that_failed_keeps_its_process_group(one_rank_group, monkeypatch, capsys):
    def fail(args):
        raise ValueError("bad input on this rank")

    _command(monkeypatch, fail)
    assert cli.main(["ranked"]) == 2
    assert "error: bad input on this rank" in capsys.readouterr().err
    assert dist.is_initialized()
