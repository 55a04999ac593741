"""A forward raising on an operand whose kind no input changes is a FAIL naming the line.

``torch.clamp(Half(x, k), lo, hi)`` calls an autograd.Function class without ``.apply``: the
call builds a ``Half`` object whatever ``x`` and ``k`` are, and clamp rejects it on every call.
``((x / s).abs >= 1)`` compares the bound method ``abs`` (parentheses missing) on every call.
Both were skips blaming synthesised inputs (corpus 13 held-out: wageubn WeightQuant and
ErrorQuant). A name read on every call and defined nowhere raises NameError the same way, now
explained where it is met. Errors whose cause an input may change stay what they were.
The reference: the same Functions written correctly run, and autograd of the same expression
gives their gradient; a planted wrong backward of the corrected one FAILs.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.input_free import input_free
from gradsmith.discovery.synthesize import NoInputs, Synthesized, synthesize


class Half(Function):
    @staticmethod
    def forward(ctx, x, k):
        return torch.round(x * 2 ** (k - 1)) / 2 ** (k - 1)

    @staticmethod
    def backward(ctx, g):
        return g, None


class CalledClass(Function):
    @staticmethod
    def forward(ctx, x, k):
        return torch.clamp(Half(x, k), -1.0, 1.0)

    @staticmethod
    def backward(ctx, g):
        return g, None


class MethodOperand(Function):
    @staticmethod
    def forward(ctx, x, s):
        big = ((x / s).abs >= 1) * x
        return big + x

    @staticmethod
    def backward(ctx, g):
        return 2 * g, None


class Built(Function):
    """Called directly it builds something else: its own ``__new__`` decides."""

    def __new__(cls, *args):
        return torch.zeros(1)

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class CallsBuilt(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.clamp(Built(x), -1.0, 1.0) * "not a number"

    @staticmethod
    def backward(ctx, g):
        return g


class LocalClass(Function):
    @staticmethod
    def forward(ctx, x, k):
        quant = Half
        return torch.clamp(quant(x, k), -1.0, 1.0)

    @staticmethod
    def backward(ctx, g):
        return g, None


class AfterEarlyReturn(Function):
    @staticmethod
    def forward(ctx, x):
        if x.dim() == 1:
            return x * 2
        return (x.abs >= 1) * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class InputDependent(Function):
    """clamp rejects the bound only when the caller passes a string: not a fixed kind."""

    @staticmethod
    def forward(ctx, x, lo):
        return torch.clamp(x, lo)

    @staticmethod
    def backward(ctx, g):
        return g, None


class CalledClassFixed(Function):
    @staticmethod
    def forward(ctx, x, k):
        return torch.clamp(Half.apply(x, k), -1.0, 1.0)

    @staticmethod
    def backward(ctx, g):
        return g, None


class MethodOperandFixed(Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(x, torch.as_tensor(s))
        return ((x / s).abs() >= 1) * x + x

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * (((x / s).abs() >= 1).to(g) + 1), None


class MethodOperandWrong(MethodOperandFixed):
    @staticmethod
    def backward(ctx, g):
        return 2 * g, None


def _raised(fn, *args):
    with pytest.raises(Exception) as info:
        fn.apply(*args)
    return info.value


@pytest.mark.parametrize(("fn", "extra", "kind"), [
    (CalledClass, (4,), "function-class"), (MethodOperand, (0.5,), "method-object")])
def test_the_operand_is_found_whatever_the_inputs(fn, extra, kind):
    for x in (torch.randn(3, dtype=torch.float64), torch.randn(2, 5), 10 * torch.randn(4, 1)):
        exc = _raised(fn, x, *extra)
        assert isinstance(exc, TypeError)
        found = input_free(exc)
        assert found is not None and found["kind"] == kind, found
    assert (found["owner"], found["operand"]) == (("Half", "Half(x, k)") if kind ==
                                                  "function-class" else ("", "(x / s).abs"))


@pytest.mark.parametrize("fn", [CallsBuilt, LocalClass, AfterEarlyReturn, InputDependent])
def test_an_operand_an_input_may_change_is_not_input_free(fn):
    x = torch.randn(2, 3, dtype=torch.float64)
    extra = {LocalClass: (4,), InputDependent: ("low",)}.get(fn, ())
    assert input_free(_raised(fn, x, *extra)) is None, fn.__name__


@pytest.mark.parametrize("fn", [CalledClass, MethodOperand])
def test_the_row_fails_with_the_fix_instead_of_skipping(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized) and "whatever the inputs" in found.description, found
    report = gradsmith.check(fn, *found.args, compat=False)
    assert report.verdict == "FAILED" and report.codes("error") == {"forward-error"}, report
    (finding,) = report.errors
    assert finding.details["cause"] == "input-free"
    assert (".apply" if fn is CalledClass else "(x / s).abs()") in finding.hint, finding


def test_an_unproven_operand_stays_a_skip():
    assert isinstance(synthesize(LocalClass), NoInputs)  # a local may hold anything


def test_the_corrected_functions_pass_and_a_planted_wrong_backward_fails():
    x = torch.randn(3, 4, dtype=torch.float64)
    xl = x.clone().requires_grad_(True)
    MethodOperandFixed.apply(xl, 0.5).sum().backward()
    xr = x.clone().requires_grad_(True)
    (((xr / 0.5).abs() >= 1) * xr + xr).sum().backward()
    torch.testing.assert_close(xl.grad, xr.grad)
    assert isinstance(CalledClassFixed.apply(x, 4), torch.Tensor)
    assert gradsmith.check(MethodOperandFixed, x.clone().requires_grad_(True), 0.5,
                           compat=False).passed
    report = gradsmith.check(MethodOperandWrong, x.clone().requires_grad_(True), 0.5,
                             compat=False)
    assert report.verdict == "FAILED", report


def test_a_name_defined_nowhere_is_explained_where_it_is_met(tmp_path):
    (tmp_path / "leftover.py").write_text(
        "import torch\nfrom torch.autograd import Function\n\n\n"
        "class Leftover(Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        y = x * 2\n        return y * prec_sf\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return 2 * g\n")
    spec = importlib.util.spec_from_file_location("_fixed_operands_leftover",
                                                  tmp_path / "leftover.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exc = _raised(module.Leftover, torch.randn(3, dtype=torch.float64))
    assert isinstance(exc, NameError)
    found = input_free(exc)
    assert found is not None and (found["name"], found["line"]) == ("prec_sf", 9), found
    report = gradsmith.check(module.Leftover, torch.randn(3, dtype=torch.float64,
                                                          requires_grad=True), compat=False)
    (finding,) = report.errors
    assert finding.code == "forward-error" and finding.details["cause"] == "input-free"
    assert "defined nowhere" in finding.message or "not a global" in finding.message
