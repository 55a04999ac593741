"""Zero-config diagonal-matrix inputs (corpus 8a: DifferentiableSVD's ``Power`` takes
``eig_diag.sqrt()`` of a whole eigenvalue matrix and returns ``0.5 * diag_embed(...)`` for it;
on a random square matrix forward is NaN off the diagonal, a false alarm). Reduced case
written here; the reference is autograd of ``U diag(sqrt(d)) U^T`` in the diagonal ``d``.
A planted wrong backward still FAILs."""

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.diagonals import read_diagonals
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _root(factor: float = 0.5):
    class Root(Function):
        @staticmethod
        def forward(ctx, first, second):
            vecs, vals = first, second
            ctx.save_for_backward(vecs, vals)
            return vecs.bmm(vals.sqrt()).bmm(vecs.transpose(1, 2))

        @staticmethod
        def backward(ctx, g):
            vecs, vals = ctx.saved_tensors
            d_vecs = (g + g.transpose(1, 2)).bmm(vecs).bmm(vals.pow(0.5))
            inv = torch.diag_embed(torch.diagonal(vals, dim1=1, dim2=2).pow(-0.5))
            d_vals = inv.bmm(vecs.transpose(1, 2)).bmm(g).bmm(vecs)
            d_vals = factor * torch.diag_embed(torch.diagonal(d_vals, dim1=1, dim2=2))
            return d_vecs, d_vals

    return Root


def test_an_eigenvalue_matrix_is_synthesised_diagonal_and_a_correct_backward_passes():
    fn = _root()
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    vecs, vals = found.args
    diag = torch.diagonal(vals, dim1=-2, dim2=-1)
    assert torch.equal(vals, torch.diag_embed(diag)) and bool((diag > 0).all())
    assert "diagonal" in found.description
    report = gradsmith.check(fn, *found.args)
    assert report.passed, report
    # the reference: autograd of U diag(sqrt(d)) U^T, d the diagonal
    d = diag.detach().clone().requires_grad_(True)
    u = vecs.detach().clone().requires_grad_(True)
    g = torch.randn(vecs.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    want = torch.autograd.grad(u @ torch.diag_embed(d.sqrt()) @ u.mT, (u, d), g)
    got = torch.autograd.grad(fn.apply(vecs, vals), (vecs, vals), g)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(torch.diagonal(got[1], dim1=-2, dim2=-1), want[1])


@pytest.mark.parametrize("factor", [1.0, -0.5])
def test_a_wrong_diagonal_gradient_still_fails(factor):
    found = synthesize(_root(factor))
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(_root(factor), *found.args)
    assert not report.passed
    assert "gradient-mismatch" in {f.code for f in report.errors}, report


def test_a_full_gradient_is_not_read_as_diagonal():
    class Full(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g @ b.mT, a.mT @ g

    hints = {"a": Hint(), "b": Hint()}
    read_diagonals(Full, hints)
    assert hints["a"].matrix is None and hints["b"].matrix is None


def test_a_diagonal_gradient_of_a_full_matrix_still_fails():
    # the off-diagonal gradient of x @ a forgotten: backward builds it with diag_embed, but
    # the code never reads a's diagonal, so a stays a full matrix and the bug is found
    class Forgot(Function):
        @staticmethod
        def forward(ctx, x, a):
            assert a.size(1) == a.size(2)  # a batch of square matrices
            ctx.save_for_backward(x, a)
            return x.bmm(a)

        @staticmethod
        def backward(ctx, g):
            x, a = ctx.saved_tensors
            d_a = torch.diagonal(x.transpose(1, 2).bmm(g), dim1=1, dim2=2)
            return g.bmm(a.transpose(1, 2)), torch.diag_embed(d_a)

    hints = {"x": Hint(), "a": Hint()}
    read_diagonals(Forgot, hints)
    assert hints["a"].matrix is None
    found = synthesize(Forgot)
    assert isinstance(found, Synthesized), found
    assert "diagonal" not in found.description
    report = gradsmith.check(Forgot, *found.args)
    assert not report.passed and report.errors, report  # a diagonal a would hide it: a PASS
