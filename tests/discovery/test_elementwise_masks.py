"""A backward building masks with Python ``and`` on tensors (``mask1 = x >= -1 and x < 0``)
raises on every input of more than one element: synthesis no longer settles on a 0-d input
where the line runs (an INCOMPLETE hiding the harm) but reports the backward-error on the
(3, 4) layout (issue 18, corpus 14 held-out: Optimized-Binarized-Neural-Networks'
Binarization2). Reduced cases written here: the ``and`` binarization (harm, must FAIL), the same
with ``&`` (an undeclared estimator whose declaration passes, not a backward-error), and a
scalar-written ``if x > 0 and x < 1`` test, which stays judged by synthesis as before."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.elementwise_masks import is_mask_assignment

CASE = '''
import torch


class SignAnd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x < 0, -torch.ones_like(x), torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad = grad_output.clone()
        inner = x >= -1 and x < 1
        grad[~inner] = 0
        return grad


class SignAmp(SignAnd):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad = grad_output.clone()
        inner = (x >= -1) & (x < 1)
        grad[~inner] = 0
        return grad
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("masks") / "masks_case.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("masks_case", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_the_line_kinds():
    assert is_mask_assignment("mask1 = input >=-1 and input<0")
    assert is_mask_assignment("m = a < 1 or a > 2")
    assert not is_mask_assignment("if x > 0 and x < 1:")
    assert not is_mask_assignment("m = ready and done")  # not comparisons


def test_an_and_mask_is_harm_on_the_batched_layout(module):
    found = synthesize(module.SignAnd)
    assert isinstance(found, Synthesized), found
    (x,) = found.args
    assert x.dim() == 2 and x.numel() > 1  # not shrunk to one value
    # Independent reference: autograd itself raises on such an input
    leaf = x.detach().clone().requires_grad_(True)
    with pytest.raises(RuntimeError, match="ambiguous"):
        module.SignAnd.apply(leaf).sum().backward()
    report = gradsmith.check(module.SignAnd, x.detach())
    assert "backward-error" in report.codes("error"), str(report)


def test_the_elementwise_form_is_an_estimator_not_an_error(module):
    found = synthesize(module.SignAmp)
    assert isinstance(found, Synthesized), found
    (x,) = found.args
    assert x.numel() > 1
    report = gradsmith.check(module.SignAmp, x.detach())
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    # Independent reference: the clipped straight-through gradient by hand
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.SignAmp.apply(leaf).sum(), leaf)
    torch.testing.assert_close(got, ((x >= -1) & (x < 1)).to(x.dtype))
