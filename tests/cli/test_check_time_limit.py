"""The time limit measures the user's code: never the worker's start-up, torch's lazy imports or
the first compile's set-up, and the deployment checks get a limit of their own (issue 21)."""

from __future__ import annotations

import json
import os
import pickle
import time

from gradsmith.isolation import sandbox
from gradsmith.isolation.protocol import FrameReader, frame
from gradsmith.isolation.worker import Server, _Task

# At import (in the task process, under its time limit) the module writes down which of the
# deployment checks' lazy imports the task found already paid.
PROBE = """
import json, os, sys
with open(os.environ["GS_TEST_PROBE"], "w") as handle:
    json.dump({m: m in sys.modules for m in ("torch._dynamo", "torch._functorch.aot_autograd",
                                              "torch.export")}, handle)


@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),))
class Double(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""


def test_first_task_finds_compile_and_export_machinery_already_imported(
        write, gradsmith_cli, tmp_path, monkeypatch):
    # One Function, one job: before the fix, the server warmed up only when tasks queued
    # behind a running one, so the first Function of a worker paid Dynamo's imports itself.
    probe = tmp_path / "probe.json"
    monkeypatch.setenv("GS_TEST_PROBE", str(probe))
    write("ops.py", PROBE)
    code, out, _ = gradsmith_cli("ops.py", "--jobs", "1", "--format", "json",
                                 "--timeout", "300")
    rows = json.loads(out)["results"]
    assert code == 0 and [r["verdict"] for r in rows] == ["pass"]
    assert rows[0]["inputs"] and rows[0]["report"]["compat"]
    assert json.loads(probe.read_text()) == {"torch._dynamo": True,
                                             "torch._functorch.aot_autograd": True,
                                             "torch.export": True}


def _server() -> tuple[Server, int]:
    to_parent_r, to_parent_w = os.pipe()
    server = Server(os.open(os.devnull, os.O_RDONLY), to_parent_w)
    return server, to_parent_r


def test_each_deployment_check_restarts_the_task_clock_a_bounded_number_of_times():
    from gradsmith.checker.deploy import DEPLOY_MODULES
    from gradsmith.isolation.worker import _DEPLOY_CLOCKS

    assert _DEPLOY_CLOCKS == len(DEPLOY_MODULES)  # one fresh limit per deployment check
    server, from_server = _server()
    read_end, write_end = os.pipe()
    task = _Task(index=3, keeper=-1, fd=read_end, log=os.devnull, timeout=30.0)
    task.started = task.launched = time.monotonic() - 25.0  # 25 s of eager checks so far
    deadline_before = task.deadline
    os.write(write_end, frame(sandbox.DEPLOY) + frame(sandbox.EVENT + pickle.dumps({})))
    server._read_task(task)
    assert task.deadline > deadline_before + 20.0  # a fresh 30 s for compile
    assert task.launched < task.started  # the row's elapsed still counts from the fork
    reader = FrameReader()
    messages = [pickle.loads(p) for p in reader.feed(os.read(from_server, 1 << 16))]
    assert messages[0] == ("started", 3)  # the parent's watchdog restarts with it
    assert messages[1][:2] == ("progress", 3)
    for _ in range(_DEPLOY_CLOCKS - 1):  # export, autocast, ...: each its own limit
        task.started -= 25.0
        os.write(write_end, frame(sandbox.DEPLOY))
        server._read_task(task)
    assert task.deadline > time.monotonic() + 20.0
    # One more (user code writing into the pipe) buys no more time: the task stays bounded.
    task.started -= 25.0
    again = task.deadline
    os.write(write_end, frame(sandbox.DEPLOY))
    server._read_task(task)
    assert task.deadline == again
    for fd in (write_end, read_end, from_server, server.proto_in, server.proto_out):
        os.close(fd)
    os.rmdir(server.logs)


# Right in eager; under torch.compile (the compile check) it never ends.
HANGS_WHEN_COMPILED = """
import time


@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),))
class SlowCompile(Function):
    @staticmethod
    def forward(ctx, x):
        if torch.compiler.is_compiling():
            time.sleep(600)
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""


def test_rows_that_run_out_of_time_keep_their_inputs_column(write, snippets, gradsmith_cli):
    write("ops.py", snippets.hangs, HANGS_WHEN_COMPILED)
    code, out, _ = gradsmith_cli("ops.py", "--timeout", "8", "--jobs", "2", "--format", "json")
    rows = {r["name"]: r for r in json.loads(out)["results"]}
    hang = rows["ops.py::Hangs"]
    assert (hang["error"], hang["inputs"]) == ("timeout", "registered example")
    slow = rows["ops.py::SlowCompile"]
    codes = [f["code"] for f in slow["report"]["findings"]]
    assert "deployment-timeout" in codes and slow["inputs"] == "registered example"
