"""A module's import time is kept out of the per-Function time limit (issue 18, "Scale"):
importing a module that takes longer than --timeout (300 Functions, a large library) gave every
row "importing it: timed out". Listing a target is its import and gets the start-up limit
(--startup-timeout); a check task's import does too, and its own --timeout starts once the
import is done."""

from __future__ import annotations

import json
import os
import pickle
import time

from gradsmith.isolation import sandbox
from gradsmith.isolation.pool import WorkerPool
from gradsmith.isolation.protocol import FrameReader, frame
from gradsmith.isolation.worker import Server, _imports_first, _Task

SLOW_IMPORT = """
import time

time.sleep(5)  # a large library's import, longer than --timeout


class Double(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""


def test_an_import_longer_than_the_timeout_is_not_a_timed_out_row(write, gradsmith_cli):
    write("slow.py", SLOW_IMPORT)
    code, out, _ = gradsmith_cli("slow.py", "--timeout", "3", "--no-compat", "--format",
                                 "json")
    rows = json.loads(out)["results"]
    assert [(r["name"], r["verdict"], r["error"]) for r in rows] == [
        ("slow.py::Double", "pass", None)], rows
    assert code == 0


def test_listing_and_check_tasks_import_first_and_others_do_not():
    assert _imports_first(("gradsmith.discovery.task", None))
    assert _imports_first(("gradsmith.checkrun.task", None))
    assert not _imports_first(("gradsmith.bench.task", None))
    assert not _imports_first(("not.gradsmith", None))  # fails in its task, with the reason


def test_the_import_done_frame_starts_the_tasks_own_limit_once():
    to_parent_r, to_parent_w = os.pipe()
    server = Server(os.open(os.devnull, os.O_RDONLY), to_parent_w)
    read_end, write_end = os.pipe()
    task = _Task(index=2, keeper=-1, fd=read_end, log=os.devnull, timeout=120.0, then=3.0)
    task.started = task.launched = time.monotonic() - 60.0  # a minute importing
    os.write(write_end, frame(sandbox.IMPORTED))
    server._read_task(task)
    assert (task.timeout, task.then) == (3.0, None)  # --timeout, from now on
    assert task.deadline > time.monotonic() + 2.0 and task.launched < task.started
    messages = [pickle.loads(p) for p in FrameReader().feed(os.read(to_parent_r, 1 << 16))]
    assert messages == [("started", 2)]  # the parent's watchdog restarts with it
    before = task.deadline
    task.started -= 2.0
    os.write(write_end, frame(sandbox.IMPORTED))  # again (user code): no more time
    server._read_task(task)
    assert task.deadline == before - 2.0
    for fd in (write_end, read_end, to_parent_r, server.proto_in, server.proto_out):
        os.close(fd)
    os.rmdir(server.logs)


def test_an_import_that_outlasts_the_start_up_limit_says_so():
    pool = WorkerPool(timeout=3.0, startup_timeout=7.0)
    text = pool._describe("timeout", {"importing": True, "limit": 7.0, "tail": ""})
    pool._selector.close()
    assert text.startswith("importing it timed out after 7 s") and "--startup-timeout" in text
