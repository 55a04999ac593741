"""Zero-config dtype and device arguments, and int bounds (issue 18, corpus 4 part a: forwards
that build tensors take ``dtype: torch.dtype, device: torch.device`` or pass them as
``dtype=``/``device=``; they were made 0.1 and every layout failed. An occupation number's
``floor_a``/``ceil_a`` were both 2, so forward never read ``a`` and a correct backward was
called an estimator). Reduced cases, written here."""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _occupation(offset: int):
    class Occupation(Function):
        """res[:floor] = 1, res[ceil - 1] = a - floor (a fractional occupation)."""

        @staticmethod
        def forward(ctx, a, floor_a: int, ceil_a: int, nlength: int, dtype: torch.dtype,
                    device: torch.device):
            res = torch.zeros(nlength, dtype=dtype, device=device)
            res[:floor_a] = 1
            if ceil_a > floor_a:
                res[ceil_a - 1] = float(a.item()) - floor_a
            ctx.ceil_a = ceil_a
            return res

        @staticmethod
        def backward(ctx, grad_res):
            return (grad_res[ctx.ceil_a - offset],) + (None,) * 5

    return Occupation


class Scatter(Function):
    """x summed into an n-vector built with the dtype and device forward is given."""

    @staticmethod
    def forward(ctx, x, kind, where):
        out = torch.zeros(x.shape[-1], dtype=kind, device=where)
        ctx.rows = x.shape[0]
        return out + x.sum(0)

    @staticmethod
    def backward(ctx, g):
        return g.expand(ctx.rows, -1).clone(), None, None


def test_a_dtype_and_a_device_are_the_inputs_own_and_int_bounds_open_a_window():
    right = _occupation(1)
    found = synthesize(right)
    assert isinstance(found, Synthesized), found
    a, floor_a, ceil_a, nlength, dtype, device = found.args
    assert dtype == a.dtype == torch.float64 and device == a.device
    assert floor_a < ceil_a <= nlength  # the branch that reads a runs
    (got,) = torch.autograd.grad(right.apply(*found.args).sum(), a)
    # reference: by hand, a enters one element with slope 1
    torch.testing.assert_close(got, torch.ones_like(a))
    report = gradsmith.check(right, *found.args)
    assert report.passed, report.codes("error")


def test_a_backward_reading_the_wrong_element_still_fails():
    wrong = _occupation(2)
    found = synthesize(wrong)
    assert isinstance(found, Synthesized), found
    assert "gradient-mismatch" in gradsmith.check(wrong, *found.args).codes("error")


def test_dtype_and_device_passed_as_keywords_are_recognised():
    found = synthesize(Scatter)
    assert isinstance(found, Synthesized), found
    x, kind, where = found.args
    assert kind == x.dtype and where == x.device
    assert "the inputs' dtype" in found.description
