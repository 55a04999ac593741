"""A task that glibc's heap check aborted, whose crash handler then hangs, is ended early.

cling (cppyy) installs a crash handler that runs a debugger for a backtrace; in a heap that a
kernel corrupted on inputs outside its contract it can hang until the time limit (jitfields'
MatVec family in corpus 13 waited out 30 s per row). The worker ends such a task once its
output has gone quiet after glibc's message: the row is placed as before (INCOMPLETE
``synthesis-crash``, glibc's message shown even above a long backtrace), but says it was not
waited out. A quiet, slow Function without that message is not ended, and a planted wrong
backward beside them still FAILs.
"""

from __future__ import annotations

HANGS = '''
import os
import time

_CORRUPTED = []


class CorruptsThenHangs(Function):
    """backward corrupts memory; the next forward's free() aborts and the handler hangs."""

    @staticmethod
    def forward(ctx, x):
        if _CORRUPTED:
            os.write(2, b"free(): invalid next size (fast)\\n *** Break *** abort\\n")
            for frame in range(40):  # a debugger's backtrace pushes glibc's line far up
                os.write(2, f"#{frame} 0x00007f in frame_{frame} ()\\n".encode())
            time.sleep(600)
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        _CORRUPTED.append(True)
        return 2 * grad


_SLEPT = []


@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),))
class QuietlySlowOnce(Function):
    """Silent for 3 s (longer than the abort watch's quiet time): not a death, it passes."""

    @staticmethod
    def forward(ctx, x):
        if not _SLEPT:
            _SLEPT.append(True)
            time.sleep(3)
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad

'''


def test_a_hang_after_glibc_aborted_is_ended_not_waited_out(write, check_rows, snippets):
    write("hangs.py", HANGS, snippets.triples)
    code, rows = check_rows("hangs.py", "--no-compat", "--timeout", "120")
    assert code == 1

    hung = rows["CorruptsThenHangs"]
    assert (hung["verdict"], hung["error"]) == ("fail", "incomplete"), hung
    assert "not waited out to the --timeout of 120 s" in hung["reason"], hung["reason"]
    assert "free(): invalid next size (fast)" in hung["reason"]
    found = {f["code"]: f for f in hung["report"]["findings"]}
    assert found["synthesis-crash"]["severity"] == "warning"
    assert "'free(): invalid'" in found["synthesis-crash"]["message"]

    slow = rows["QuietlySlowOnce"]
    assert slow["verdict"] == "pass", slow["reason"]
    planted = rows["TriplesInBackward"]
    assert planted["verdict"] == "fail" and planted["error"] is None
    assert "gradient-mismatch" in {f["code"] for f in planted["report"]["findings"]}


def test_the_abort_watch_reads_a_log_only_once_it_has_gone_quiet(tmp_path):
    """The watch looks at the log's size every second and reads its text once per quiet
    stretch: growing output is never judged, and glibc's message is what ends a task."""
    from gradsmith.isolation import worker

    log = tmp_path / "task.log"
    log.write_bytes(b"iterating\n")
    task = worker._Task(0, 0, -1, str(log), 30.0)
    check = worker.Server._heap_aborted
    assert not check(task, 0.0)  # first look: the size is new
    assert not check(task, 5.0)  # quiet, but nothing says the process is dying
    log.write_bytes(b"iterating\nfree(): invalid pointer\n")
    assert not check(task, 6.0)  # it grew: wait for the rest of the backtrace
    assert not check(task, 7.0)  # quiet for less than _ABORT_QUIET
    assert check(task, 6.0 + worker._ABORT_QUIET)
