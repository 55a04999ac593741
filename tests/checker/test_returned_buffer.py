"""A forward that fills a buffer it was handed through a library call, and returns the buffer
untouched when the library was never set up (LEAP's tomography operators print an error and
write nothing): INCOMPLETE (``not-exercised``), not an undeclared-estimator FAIL. The same
Function with the library set up is checked as usual: a planted wrong backward fails, and a
gradient reversal (forward returns its input's values, backward negates) stays an error.

Reference: the operator is ``out = x @ M`` (a fixed matrix), whose gradient is ``g @ M.T``."""

from __future__ import annotations

import torch

from gradsmith import check


class Library:
    """A stand-in for a C library holding its own configuration (a geometry)."""

    def __init__(self, matrix=None):
        self.matrix = matrix

    def apply(self, x, out):
        if self.matrix is None:
            print("Error: geometry not set")  # what such libraries do: nothing else
            return out
        out.copy_(x @ self.matrix)
        return out

    def adjoint(self, g, out):
        if self.matrix is not None:
            out.copy_(g @ self.matrix.T)
        return out


UNSET = Library()
SET = Library(torch.randn(4, 4, dtype=torch.float64,
                          generator=torch.Generator().manual_seed(3)))


def _operator(lib, dirty=True):
    class Operator(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scratch, out):
            if dirty:  # it writes into out (LEAP does not say so; unset, it writes nothing)
                ctx.mark_dirty(out)
            lib.apply(x, out)
            ctx.save_for_backward(scratch)
            return out

        @staticmethod
        def backward(ctx, g):
            (scratch,) = ctx.saved_tensors
            return lib.adjoint(g, scratch.clone()), None, None

    return Operator


class WrongOperator(_operator(SET)):
    @staticmethod
    def backward(ctx, g):
        (scratch,) = ctx.saved_tensors
        return SET.adjoint(g, scratch.clone()) * 1.1, None, None  # 10 % off


class Reversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g, None


def _args(seed=0, buffer_grad=False):
    gen = torch.Generator().manual_seed(seed)
    x, scratch, out = (torch.randn(3, 4, dtype=torch.float64, generator=gen)
                       for _ in range(3))
    return x.requires_grad_(), scratch, out.requires_grad_(buffer_grad)


def _errors(report):
    return {f.code for f in report.findings if f.is_error}


def test_reference_adjoint():
    x, _, _ = _args()
    g = torch.randn(3, 4, dtype=torch.float64)
    (want,) = torch.autograd.grad(x @ SET.matrix, x, g)
    torch.testing.assert_close(SET.adjoint(g, torch.empty(3, 4, dtype=torch.float64)), want)


def test_an_unset_library_is_incomplete_not_an_estimator():
    report = check(_operator(UNSET, dirty=False), *_args(buffer_grad=True))  # LEAP's vol requires grad
    assert not _errors(report), report.findings
    idle = [f for f in report.findings if f.code == "not-exercised"]
    assert idle and idle[0].details["buffer"] == "out", report.findings


def test_a_set_library_passes_and_a_wrong_adjoint_fails():
    right = check(_operator(SET), *_args())  # judged on its gradients as usual
    assert not _errors(right) & {"gradient-mismatch", "undeclared-estimator"}, right.findings
    assert not any(f.code == "not-exercised" for f in right.findings)
    report = check(WrongOperator, *_args())
    assert "gradient-mismatch" in _errors(report), report.findings
    assert not any(f.code == "not-exercised" for f in report.findings)


def test_a_gradient_reversal_stays_an_error():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = check(Reversal, x, y)
    assert _errors(report), report.findings
    assert not any(f.code == "not-exercised" for f in report.findings)
