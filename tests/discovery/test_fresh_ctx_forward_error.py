"""A forward whose error comes from ctx's fresh state, not from its arguments, is a FAIL naming
the cause, not a skip (corpus 11c dev: torch3d's ``ChamferDistance`` defines ``forward`` twice and
no backward; the second definition, the intended backward, unpacks ``ctx.saved_tensors``, which
is empty in forward, so every call raises whatever the inputs). Reduced cases written here; the
reference is the Function called on inputs of several shapes (it raises on each), and autograd
of ``x * x`` for the repaired one.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.input_free import input_free
from gradsmith.discovery.synthesize import Synthesized, synthesize


class TwiceForward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def forward(ctx, grad):  # noqa: F811 - the defect under test: meant as backward
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class ReadsUnsetAttribute(Function):
    @staticmethod
    def forward(ctx, x):
        scale = ctx.scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale


class SavesThenReads(Function):
    """ctx is no longer fresh once forward saved: what it holds may depend on the inputs."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a, b = ctx.saved_tensors
        return x * a * b

    @staticmethod
    def backward(ctx, g):
        return g


class SetsThenReadsMissing(Function):
    @staticmethod
    def forward(ctx, x):
        if x.dim() > 5:
            ctx.scale = 2.0
        return x * ctx.scale

    @staticmethod
    def backward(ctx, g):
        return g


class Square(Function):
    """The repaired ``TwiceForward``."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class SquareDoubled(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 4 * x * grad


def _raised(fn, x):
    with pytest.raises(Exception) as info:
        fn.apply(x)
    return info.value


@pytest.mark.parametrize("shape", [(3,), (2, 5), ()])
def test_every_input_raises_and_the_cause_is_the_fresh_ctx(shape):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    found = input_free(_raised(TwiceForward, x))
    assert found is not None and found["ctx_read"] == ["ctx.saved_tensors"], found
    found = input_free(_raised(ReadsUnsetAttribute, x))
    assert found is not None and found["ctx_read"] == ["ctx.scale"], found


def test_a_ctx_forward_already_touched_is_not_fresh():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    for fn in (SavesThenReads, SetsThenReadsMissing):
        try:
            fn.apply(x)
        except Exception as exc:  # noqa: BLE001 - whatever torch raises there
            assert input_free(exc) is None, fn.__name__


def test_the_row_fails_with_the_cause_instead_of_a_skip():
    found = synthesize(TwiceForward)
    assert isinstance(found, Synthesized), found  # before: NoInputs, a skip
    report = gradsmith.check(TwiceForward, *found.args, compat=False)
    assert report.verdict == "FAILED", report
    (finding,) = [f for f in report.errors if f.code == "forward-error"]
    assert finding.details["cause"] == "input-free"
    assert "ctx.saved_tensors" in finding.message and "backward" in finding.hint


def test_an_error_from_the_arguments_is_not_the_fresh_ctxs():
    class ReadsShape(Function):
        @staticmethod
        def forward(ctx, x):
            a, b, c, d, e, f, g = x.shape
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    exc = _raised(ReadsShape, torch.randn(3, dtype=torch.float64))
    assert isinstance(exc, ValueError) and input_free(exc) is None


def test_the_repaired_function_passes_and_a_planted_wrong_backward_fails():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(Square.apply(x).sum(), x)
    (want,) = torch.autograd.grad((x * x).sum(), x)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(Square, x, compat=False).passed
    assert "gradient-mismatch" in gradsmith.check(SquareDoubled, x, compat=False).codes("error")
