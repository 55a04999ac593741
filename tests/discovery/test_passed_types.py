"""A parameter forward only keeps on ctx (``ctx.leak = leak``) and backward hands to a
``@torch.jit.script`` function annotated ``leak: float``: synthesis reads the annotation and
gives a float, not a 0-d tensor (which made the frozen-input check fail for the wrong reason
and left a template as the declaration; RDP_TCLIF's leaky_k_relu of corpus 7b dev, issue 18)."""

from __future__ import annotations

import importlib.util
import re
import textwrap
import warnings

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize

CASE = '''
import torch


@torch.jit.script
def leaky_backward(grad_output: torch.Tensor, x: torch.Tensor, leak: float, k: float):
    mask = (x >= 0.).to(x)
    return grad_output * (mask * k + (1. - mask) * leak), None, None


class LeakySpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, leak, k):
        if x.requires_grad:
            ctx.save_for_backward(x)
            ctx.leak = leak
            ctx.k = k
        return (x >= 0).to(x)

    @staticmethod
    def backward(ctx, grad_output):
        return leaky_backward(grad_output, ctx.saved_tensors[0], ctx.leak, ctx.k)


class QPseudoSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return (x >= 0).to(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (1 + 2 / (ctx.alpha - 1) * x.abs()).pow(-ctx.alpha) * grad_output, None


class Swapped(LeakySpike):
    @staticmethod
    def backward(ctx, grad_output):
        return leaky_backward(grad_output, ctx.saved_tensors[0], ctx.k, ctx.leak)
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("passed_types") / "leaky.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("leaky_case", path)
    found = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # torch.jit.script is deprecated: the projects still use it
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_annotated_ctx_values_are_synthesised_as_distinct_floats(module):
    found = synthesize(module.LeakySpike)
    assert isinstance(found, Synthesized), found
    x, leak, k = found.args
    assert type(leak) is float and type(k) is float and leak != k
    # the scripted backward accepts them: torch runs it
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(module.LeakySpike.apply(x, leak, k).sum(), x)
    torch.testing.assert_close(g, torch.where(x >= 0, k, leak).to(x))


def test_printed_declaration_passes_and_a_swapped_backward_fails(module):
    x, leak, k = synthesize(module.LeakySpike).args
    report = gradsmith.check(module.LeakySpike, x.detach(), leak, k)
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    factory, source = re.search(r"example\((lambda: .*), surrogate=(lambda .*)\)$",
                                f.details["declaration"]).groups()
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    declared = eval(source, {"torch": torch})  # noqa: S307
    assert gradsmith.check(module.LeakySpike, *args, surrogate=declared).passed
    # Independent of the line: the leaky surrogate written by hand.
    by_hand = lambda x, leak, k: leak * x + (k - leak) * x.clamp(min=0)  # noqa: E731
    assert gradsmith.check(module.LeakySpike, *args, surrogate=by_hand).passed
    assert not gradsmith.check(module.Swapped, *args, surrogate=by_hand).passed


def test_a_float_backward_divides_by_less_one_is_above_one(module):
    """``2 / (alpha - 1)``: alpha = 0.5 made the base negative and the gradient NaN (a false
    nan-gradient and gradient-mismatch on an estimator); alpha = 2 is in the family's domain."""
    found = synthesize(module.QPseudoSpike)
    x, alpha = found.args
    assert alpha == 2.0
    # Independent reference: at alpha = 2 backward is autograd of x / (1 + 2|x|)
    leaf = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad((leaf / (1 + 2 * leaf.abs())).sum(), leaf)
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.QPseudoSpike.apply(leaf, alpha).sum(), leaf)
    torch.testing.assert_close(got, want)
    report = gradsmith.check(module.QPseudoSpike, x.detach(), alpha)
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    factory, source = re.search(r"example\((lambda: .*), surrogate=(lambda .*)\)$",
                                f.details["declaration"]).groups()
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    declared = eval(source, {"torch": torch})  # noqa: S307
    assert gradsmith.check(module.QPseudoSpike, *args, surrogate=declared).passed
