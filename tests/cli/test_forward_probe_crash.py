"""A process that dies in forward while synthesis tries candidate inputs (issue 18, corpus 13).

phytorch's ``Roots`` hands its coefficients to C++ closed forms written for complex tensors;
on the real ones synthesis tries first they segfault before any backward runs. Those inputs
are not shown to fit the contract: the row is INCOMPLETE (``synthesis-crash``, a warning),
never a crash FAIL nor a PASS. The same crash on a registered example's inputs is harm a
caller meets and stays a crash FAIL; a planted wrong backward beside them still FAILs.
"""

from __future__ import annotations

CRASHES = '''
import ctypes

import torch
from torch.autograd import Function

import gradsmith


def _kernel(x):
    if not x.is_complex():
        ctypes.string_at(0)  # SIGSEGV: a compiled kernel reading a real tensor as complex
    return 2 * x


class DiesInForwardSynthesised(Function):
    @staticmethod
    def forward(ctx, x):
        return _kernel(x)

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),))
class DiesInForwardExample(Function):
    @staticmethod
    def forward(ctx, x):
        return _kernel(x)

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad

'''


def test_a_forward_crash_on_candidate_inputs_is_incomplete(write, check_rows, snippets):
    write("kernels.py", CRASHES, snippets.triples)
    code, rows = check_rows("kernels.py", "--no-compat", "--timeout", "60")
    assert code == 1
    tried = rows["DiesInForwardSynthesised"]
    assert (tried["verdict"], tried["error"]) == ("fail", "incomplete"), tried
    found = {f["code"]: f for f in tried["report"]["findings"]}
    assert found["synthesis-crash"]["severity"] == "warning"
    assert "before any backward had run" in found["synthesis-crash"]["message"]
    assert "SIGSEGV" in found["synthesis-crash"]["message"]
    shown = rows["DiesInForwardExample"]
    assert (shown["verdict"], shown["error"]) == ("fail", "crash"), shown
    planted = rows["TriplesInBackward"]
    assert planted["verdict"] == "fail" and planted["error"] is None
    assert "gradient-mismatch" in {f["code"] for f in planted["report"]["findings"]}
