"""A worker server that is killed (or terminated) from outside leaves no temporary file or
folder behind: ``gradsmith check`` made them and removes them (issue 20)."""

from __future__ import annotations

import os
import signal

import pytest

SLEEPS = """
@gradsmith.example(_x)
class Sleeps(Function):
    @staticmethod
    def forward(ctx, x):
        record("sleeping")
        time.sleep(600)

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_server_killed_from_outside_leaves_no_temporary_files(runner, write, procs, tmp_path,
                                                                 sig):
    temp = tmp_path / "tmp"  # gradsmith's temporary files go here, and only there
    temp.mkdir()
    runner.env["TMPDIR"] = str(temp)
    write("sleeps.py", SLEEPS)
    cli = runner.popen("check", "sleeps.py", "--no-compat", "--timeout", "300",
                       "--format", "json")
    sleeping = procs.wait_until(lambda: "sleeping" in runner.recorded().values(), 120)
    assert sleeping, cli.stderr.read() if cli.poll() is not None else "no task started"
    (server,) = procs.children_of(cli.pid)
    assert _ours(temp)  # the server's log and its task logs' folder
    os.kill(server, sig)
    out, err = cli.communicate(timeout=60)
    assert "worker server stopped answering" in out, err
    assert not _ours(temp), f"left after {sig.name} of the server: {_ours(temp)}"


def _ours(folder) -> list[str]:
    """gradsmith's entries (torch puts its compile cache there too)."""
    return [name for name in os.listdir(folder) if name.startswith("gradsmith")]
