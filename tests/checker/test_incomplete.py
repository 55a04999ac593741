"""A PASS means every planned check that applies ran to the end, was exercised and held: a
declaration that cannot be evaluated is an error naming it, a check that crashed or compared
nothing but zeros makes the verdict INCOMPLETE, which ``gradsmith check`` counts as a failure."""

from __future__ import annotations

import textwrap

import pytest
import torch
from square_functions import Square
from torch.autograd import Function

import gradsmith
from gradsmith.cli import main


class SquareWrong(Function):
    """x * x with the backward of x**1.5 * 2 (3 x g): wrong by a factor 1.5."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _not_implemented(x):
    raise NotImplementedError


def test_the_backward_is_wrong_by_an_independent_reference():
    x = _x(4).requires_grad_()
    (want,) = torch.autograd.grad((x * x).sum(), x)
    (got,) = torch.autograd.grad(SquareWrong.apply(x).sum(), x)
    assert not torch.allclose(got, want)


@pytest.mark.parametrize("surrogate, says", [
    (lambda x: ..., "Ellipsis"),                       # the placeholder gradsmith prints
    (lambda x: None, "returned None"),
    (_not_implemented, "NotImplementedError"),
    (lambda x, y: x, "TypeError"),                      # wrong arity
    (lambda x: x.sum(), "shaped"),                      # wrong shape
], ids=["ellipsis", "none", "not-implemented", "arity", "shape"])
def test_a_declaration_that_cannot_be_evaluated_is_an_error_naming_it(surrogate, says):
    report = gradsmith.check(SquareWrong, _x(4), surrogate=surrogate, compat=False)
    assert not report.passed and report.verdict == "FAILED", str(report)
    (finding,) = [f for f in report.errors if f.code == "surrogate-error"]
    assert says in finding.message
    assert "test_incomplete.py:" in finding.message  # where the declaration was written


def test_a_placeholder_intended_is_an_error():
    report = gradsmith.check(SquareWrong, _x(4), intended=lambda x, grad: ..., compat=False)
    assert "intended-error" in report.codes("error"), str(report)
    assert "Ellipsis" in report.errors[0].message


def test_a_crashing_check_makes_the_verdict_incomplete(monkeypatch):
    from gradsmith.checker import robustness

    def crash(session):  # a dispatcher-style error: one line, then a page of backends
        raise RuntimeError("boom\n" + "CPU: registered at ...\n" * 50)

    monkeypatch.setattr(robustness, "run", crash)
    report = gradsmith.check(Square, _x(4), compat=False)
    assert not report.errors and not report.passed and report.verdict == "INCOMPLETE"
    assert "robustness" not in report.checks
    (finding,) = report.incomplete
    assert finding.code == "check-crashed" and "boom" in finding.message
    assert "registered at" not in finding.message
    assert str(report).startswith("gradsmith check Square: INCOMPLETE")


def test_gradients_skipped_for_a_declaration_nobody_compared_is_incomplete():
    # checks= leaves the surrogate check out: the declaration replaces the gradients check,
    # so nothing compares backward with anything.
    report = gradsmith.check(SquareWrong, _x(4), surrogate=lambda x: x * x,
                             checks=["gradients", "structure"])
    assert report.verdict == "INCOMPLETE", str(report)
    (finding,) = report.incomplete
    assert finding.code == "check-incomplete" and finding.check == "gradients"
    assert "surrogate check did not run" in finding.message


class EmptyWindowQuantizer(Function):
    """Round inside [lo, hi], straight-through there: with lo == hi (a window synthesised
    empty) forward is constant and backward is 0, the gradient of a constant."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return x.clamp(lo, hi).round()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x >= ctx.lo) & (x <= ctx.hi)).to(g.dtype) * (ctx.hi > ctx.lo), None, None


def test_an_estimator_with_an_empty_window_is_not_exercised():
    x = _x(6)
    xr = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(xr.clamp(0.5, 0.5).round().sum(), xr)  # reference: zeros
    assert not want.any()
    report = gradsmith.check(EmptyWindowQuantizer, x, 0.5, 0.5, compat=False)
    assert not report.errors and report.verdict == "INCOMPLETE", str(report)
    assert [f.code for f in report.incomplete] == ["not-exercised"]


def test_a_constant_declared_surrogate_is_not_exercised():
    report = gradsmith.check(EmptyWindowQuantizer, _x(6), 0.5, 0.5, compat=False,
                             surrogate=lambda x, lo, hi: x.clamp(lo, hi))
    assert report.verdict == "INCOMPLETE" and "not-exercised" in report.codes(), str(report)



class StopGrad(Function):
    """Identity forward, zero backward by design (tf.stop_gradient)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g)


class LeakyStopGrad(StopGrad):
    """The same with the bug the declaration exists to catch: the gradient passes through."""

    @staticmethod
    def backward(ctx, g):
        return g


def _zeros(x, grad):
    return torch.zeros_like(grad)


def test_a_declared_zero_gradient_of_a_changing_forward_is_exercised():
    # Forward is the identity: its own gradient is 1 everywhere, not 0 (independent reference),
    # so backward's declared 0 is a real statement, which a leaking backward fails.
    x = _x(3, 4)
    xr = x.clone().requires_grad_()
    (own,) = torch.autograd.grad(xr.clone().sum(), xr)
    assert torch.equal(own, torch.ones_like(x))
    report = gradsmith.check(StopGrad, x, intended=_zeros, compat=False)
    assert report.passed and "surrogate" in report.checks, str(report)
    assert "not-exercised" not in report.codes()
    leaky = gradsmith.check(LeakyStopGrad, x, intended=_zeros, compat=False)
    assert "intended-mismatch" in leaky.codes("error"), str(leaky)

def test_one_example_that_exercises_backward_is_enough():
    @gradsmith.example(lambda: (_x(6), 0.5, 0.5), name="empty")
    @gradsmith.example(lambda: (_x(6) * 3, -1.0, 1.0), name="window",
                       surrogate=lambda x, lo, hi: x.clamp(lo, hi))
    class Quantizer(EmptyWindowQuantizer):
        pass

    both = gradsmith.check(Quantizer, compat=False, surrogate=lambda x, lo, hi: x.clamp(lo, hi))
    assert both.passed, str(both)


PLACEHOLDER = """
import torch
from torch.autograd import Function
import gradsmith


@gradsmith.example(lambda: (torch.randn(4, dtype=torch.float64),), surrogate=lambda x: ...)
class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


@gradsmith.example(lambda: (torch.randn(6, dtype=torch.float64), 0.5, 0.5))
class Empty(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        return x.clamp(lo, hi).round()

    @staticmethod
    def backward(ctx, g):
        return g * 0, None, None
"""


def test_cli_placeholder_fails_and_unexercised_is_an_incomplete_row(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.py").write_text(textwrap.dedent(PLACEHOLDER))
    code = main(["check", "ops.py", "--no-isolate", "--no-compat"])
    out = capsys.readouterr().out
    assert code == 1
    square = next(line for line in out.splitlines() if "ops.py::Square" in line)
    empty = next(line for line in out.splitlines() if "ops.py::Empty" in line)
    assert "FAIL" in square and "incomplete" not in square
    assert "FAIL (incomplete)" in empty
    assert "surrogate-error" in out and "not-exercised" in out
    assert "0 passed, 2 failed" in out
