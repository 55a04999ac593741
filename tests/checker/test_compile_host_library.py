"""A graph break inside NumPy or SciPy stops the compile check at the first break (issue 18,
corpus 11a's Logm: scipy.linalg.logm in forward; the compile with breaks allowed traced
SciPy's own Python frame by frame, 11.9 s, to report breaks inside SciPy). Reduced case,
written here: forward computes on a NumPy array. A break in the Function's own torch code
still gets the full trace."""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.checker.deploy import compiled


class HostExp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.from_numpy(np.asarray_chkfinite(np.exp(x.detach().numpy())))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ItemBreak(Function):
    @staticmethod
    def forward(ctx, x):
        scale = x.detach().sum().item()  # a data-dependent break in torch code
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale  # scale held constant, as forward's detach says


def test_a_break_inside_numpy_stops_at_the_first_break(monkeypatch):
    def traced(*_):
        raise AssertionError("the compile with breaks allowed ran")

    monkeypatch.setattr(compiled, "_explainer", traced)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(HostExp, x, checks=["compile"])
    assert "compile-graph-break" in report.codes("warning")
    assert report.passed  # the gradient (autograd of exp) holds; the break is a warning
    torch.testing.assert_close(torch.autograd.grad(HostExp.apply(x).sum(), x)[0], x.exp())


def test_a_break_in_torch_code_still_runs_the_full_trace(monkeypatch):
    called = []
    original = compiled._explainer
    monkeypatch.setattr(compiled, "_explainer", lambda b: called.append(b) or original(b))
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    gradsmith.check(ItemBreak, x, checks=["compile"])
    assert called


@pytest.mark.parametrize("where, host", [
    (Path(np.__file__).parent / "linalg" / "_linalg.py", True),
    (Path(__file__), False),
])
def test_host_library_frames(where, host):
    assert compiled._host_library(("a reason", (str(where), 1, "code"))) is host
