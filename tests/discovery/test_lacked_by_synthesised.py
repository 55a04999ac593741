"""Which raised errors are a synthesised object's (a skip) and which stay the Function's (issue 18:
an ``AttributeError``/``TypeError`` raised on an object gradsmith synthesised is gradsmith's
failure, never demonstrated harm). Only the class of an argument synthesis built counts: a
tensor, a builtin value, or an error of another kind is left as it was."""

from __future__ import annotations

import pytest
import torch

import gradsmith
from gradsmith.checker.report import Finding
from gradsmith.discovery.lacked import lacked_by_synthesised


class StandIn:
    """Plays an object synthesis built (its class is not a builtin)."""


def _raised(message: str, exception: str, code: str = "backward-error") -> Finding:
    return Finding(code, "error", f"backward raised {exception}: {message} (at f.py:9)", "",
                   "gradients", details={"exception": exception})


ARGS = (torch.zeros(2), StandIn())


@pytest.mark.parametrize("message, exception, said", [
    ("'StandIn' object has no attribute 'adjoint'", "AttributeError", "used .adjoint on args[1]"),
    ("'StandIn' object is not subscriptable", "TypeError", "needed args[1] subscriptable"),
    ("StandIn.apply() takes 2 positional arguments but 3 were given", "TypeError",
     "called args[1].apply() with arguments it does not take"),
], ids=["attribute", "kind", "call"])
def test_an_error_on_a_synthesised_object_is_its_own(message, exception, said):
    reason = lacked_by_synthesised(None, ARGS, [_raised(message, exception)])
    assert said in reason and "an object gradsmith synthesised" in reason


@pytest.mark.parametrize("findings", [
    [_raised("'tuple' object has no attribute 'adjoint'", "AttributeError")],  # a builtin
    [_raised("'Tensor' object has no attribute 'adjoint'", "AttributeError")],  # a tensor
    [_raised("'StandIn' object has no attribute 'adjoint'", "RuntimeError")],  # not a kind error
    [_raised("'StandIn' object has no attribute 'adjoint'", "AttributeError"),
     Finding("gradient-mismatch", "error", "gradient of x disagrees", "", "gradients")],
], ids=["builtin", "tensor", "runtime error", "beside a gradient mismatch"])
def test_other_errors_stay_the_functions(findings):
    assert lacked_by_synthesised(None, ARGS, findings) == ""


class Tagged(torch.autograd.Function):
    """Reduced from a privacy engine's layers (corpus 14): the engine tags each parameter
    (``weight.dp_clip``), backward reads the tag."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x * weight

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        scale = 1.0 if weight.dp_clip == 0 else 0.5
        return grad_out * weight, grad_out * x * scale


class TagOnGradient(Tagged):
    """Reads a tag off its incoming gradient, which no caller can set: harm on every call."""

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        return grad_out * weight, grad_out * x * grad_out.dp_scale


def _tag_raised(line: str, attr: str = "dp_clip") -> Finding:
    return Finding("backward-error", "error", "backward raised AttributeError: 'Tensor' object "
                   f"has no attribute '{attr}' (at f.py:9 in backward: `{line}`)", "",
                   "gradients", details={"exception": "AttributeError"})


def test_a_tag_a_synthesised_tensor_lacks_is_the_synthesis():
    args = (torch.ones(2), torch.ones(2))
    reason = lacked_by_synthesised(Tagged, args, [_tag_raised("if weight.dp_clip == 0:")])
    assert "read .dp_clip off weight, a tensor gradsmith synthesised" in reason
    # read off backward's incoming gradient (no user can tag it), or torch's own attribute
    assert lacked_by_synthesised(Tagged, args, [_tag_raised("if grad_out.dp_clip == 0:")]) == ""
    assert lacked_by_synthesised(Tagged, args, [_tag_raised("weight.grad.clip", "grad")]) == ""
    # really raised by an untagged synthesised tensor
    args = (torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64))
    report = gradsmith.check(Tagged, *args)
    assert "read .dp_clip off weight" in lacked_by_synthesised(Tagged, args, report.errors)


def test_a_tag_read_off_the_incoming_gradient_stays_an_error():
    args = (torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64))
    report = gradsmith.check(TagOnGradient, *args)
    assert "backward-error" in report.codes("error"), str(report)
    assert lacked_by_synthesised(TagOnGradient, args, report.errors) == ""
