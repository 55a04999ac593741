"""A backward whose one returned tensor reads its incoming gradient through a method that
gives one tensor like it (``torch.einsum(..., g.clone())``) returns one gradient, so a trailing
defaulted ``dim`` is left unpassed (issue 18, corpus 14: understanding-spigot's STESoftmax was
a false wrong-grad-count, dim passed though every caller leaves it). Reduced case written here:
a softmax with its full Jacobian, and the planted diagonal-only Jacobian that must FAIL."""

from __future__ import annotations

import importlib.util
import inspect
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.defaults import passable

CASE = '''
import torch


class Soft(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, dim=-1):
        p = torch.softmax(s, dim=dim)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad_z):
        (p,) = ctx.saved_tensors
        jac = torch.diag_embed(p) - torch.einsum("bi,bj->bij", p, p)
        grad_s = torch.einsum("bij,bj->bi", jac, grad_z.clone())
        return grad_s


class SoftDiagonal(Soft):
    @staticmethod
    def backward(ctx, grad_z):
        (p,) = ctx.saved_tensors
        jac = torch.diag_embed(p) - torch.einsum("bi,bj->bij", p, p)
        grad_s = torch.einsum("bii,bi->bi", jac, grad_z.clone())
        return grad_s
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("cloned") / "cloned_case.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("cloned_case", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_one_gradient_leaves_dim_unpassed(module):
    params = list(inspect.signature(module.Soft.forward).parameters.values())[1:]
    assert passable(module.Soft, params) == 1
    found = synthesize(module.Soft)
    assert isinstance(found, Synthesized), found
    assert len(found.args) == 1


def test_full_jacobian_passes_and_the_diagonal_fails(module):
    s = torch.randn(3, 4, dtype=torch.float64)
    # Independent reference: autograd of torch.softmax
    leaf = s.clone().requires_grad_(True)
    g = torch.randn(3, 4, dtype=torch.float64)
    (want,) = torch.autograd.grad(torch.softmax(leaf, -1), leaf, g)
    leaf = s.clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.Soft.apply(leaf), leaf, g)
    torch.testing.assert_close(got, want)
    (s,) = synthesize(module.Soft).args
    assert gradsmith.check(module.Soft, s.detach()).passed
    wrong = gradsmith.check(module.SoftDiagonal, s.detach())
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)
