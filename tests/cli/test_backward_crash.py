"""A process that dies inside a Function's backward (a kernel reading or writing out of bounds).

Where the inputs were the check's own (a registered example forward accepted), the crash is
demonstrated harm: FAIL with the error ``backward-crash`` naming the Function. Where gradsmith
was still trying synthesised candidates, the inputs are not shown to fit the contract: the row
is INCOMPLETE with the same code as a warning, never a plain crash FAIL nor a PASS. A correct
Function beside them still passes, and a planted wrong backward still FAILs on its gradient.
"""

from __future__ import annotations

import json

CRASHES = '''
import ctypes


def _read_address_zero():
    ctypes.string_at(0)  # SIGSEGV: what an out-of-bounds read in a C++ kernel does


@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),))
class DiesInBackwardExample(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        _read_address_zero()
        return 2 * grad


class DiesInBackwardSynthesised(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        _read_address_zero()
        return 2 * grad


@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),))
class Doubles(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad

'''


def test_a_crash_inside_backward_is_placed_and_judged_by_whose_inputs(write, check_rows, snippets):
    write("kernels.py", CRASHES, snippets.triples)
    code, rows = check_rows("kernels.py", "--no-compat", "--timeout", "60")
    assert code == 1

    shown = rows["DiesInBackwardExample"]
    assert (shown["verdict"], shown["error"]) == ("fail", None), shown
    found = {f["code"]: f for f in shown["report"]["findings"]}
    assert found["backward-crash"]["severity"] == "error"
    assert "DiesInBackwardExample.backward" in found["backward-crash"]["message"]
    assert "SIGSEGV" in found["backward-crash"]["message"]

    tried = rows["DiesInBackwardSynthesised"]
    assert (tried["verdict"], tried["error"]) == ("fail", "incomplete"), tried
    found = {f["code"]: f for f in tried["report"]["findings"]}
    assert found["backward-crash"]["severity"] == "warning"
    assert found["backward-crash"]["details"]["incomplete"] is True
    assert "candidate inputs" in found["backward-crash"]["message"]

    assert rows["Doubles"]["verdict"] == "pass", rows["Doubles"]["reason"]
    planted = rows["TriplesInBackward"]
    assert planted["verdict"] == "fail" and planted["error"] is None
    assert "gradient-mismatch" in {f["code"] for f in planted["report"]["findings"]}
    assert "backward-crash" not in {f["code"] for f in planted["report"]["findings"]}


LATER = '''
import os

_CORRUPTED = []


class CorruptsInBackward(Function):
    """backward leaves memory corrupted; the next forward finds it (a heap check aborts)."""

    @staticmethod
    def forward(ctx, x):
        if _CORRUPTED:
            os.abort()
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        _CORRUPTED.append(True)
        return 2 * grad
'''


def test_a_crash_after_backward_returned_on_candidate_inputs_is_incomplete(write,
                                                                           gradsmith_cli):
    write("later.py", LATER)
    code, out, _ = gradsmith_cli("later.py", "--format", "json", "--no-compat",
                                 "--timeout", "60")
    (row,) = json.loads(out)["results"]
    assert code == 1
    assert (row["verdict"], row["error"]) == ("fail", "incomplete"), row
    found = {f["code"]: f for f in row["report"]["findings"]}
    assert found["synthesis-crash"]["severity"] == "warning"
    assert "CorruptsInBackward.backward had returned" in found["synthesis-crash"]["message"]
    assert "SIGABRT" in found["synthesis-crash"]["message"]


def test_a_timeout_after_glibc_aborted_on_a_corrupted_heap_is_a_death():
    """cling's crash handler can hang in the corrupted heap until the time limit: the row is a
    timeout whose last output has glibc's heap check; it is placed like a crash."""
    from gradsmith.checkrun.backward_stage import died, mark_synthesis_crash

    reason = ("timed out after 90 s (the task and every process it started were killed); its "
              "last output:\ndouble free or corruption (out)\n *** Break *** abort")
    assert died("timeout", reason) and died("crash", None)
    assert not died("timeout", "timed out after 90 s; its last output:\nstill iterating")
    out = {"name": "k.py::MatVec", "error": "timeout", "reason": reason, "report": None,
           "text": None, "_text_brief": None, "checks": []}
    mark_synthesis_crash(out, "MatVec")
    (finding,) = out["report"]["findings"]
    assert out["error"] == "incomplete" and finding["code"] == "synthesis-crash"
    assert "'double free or corruption'" in finding["message"]
