"""Singular and eigen vectors are defined up to a sign (phase): finite differences across a
sign flip, or a complex cotangent along a vector's phase, are not derivatives. The checker
compares such outputs with each vector aligned to the base point's; a wrong backward still
fails."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.checker import gauge
from gradsmith.checker.problem import Problem


def _signed_svd(x: torch.Tensor):
    """Thin SVD with the sign convention ``U[0, k] >= 0`` (discontinuous where U[0, k] = 0)."""
    u, s, vh = torch.linalg.svd(x, full_matrices=False)
    sign = torch.where(u[..., :1, :] < 0, -1.0, 1.0).to(x.dtype).detach()
    return u * sign, s, vh * sign.mT


def _svd_function(bug: str | None = None):
    class SignedSVD(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return _signed_svd(x)

        @staticmethod
        @once_differentiable
        def backward(ctx, gu, gs, gvh):
            (x,) = ctx.saved_tensors
            if bug == "factor":  # the left singular vectors' term counted twice
                gu = 2 * gu
            if bug == "dropped":  # the right singular vectors' term forgotten
                gvh = torch.zeros_like(gvh)
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                outs = _signed_svd(leaf)
                (g,) = torch.autograd.grad(outs, leaf, (gu, gs, gvh))
            return g

    return SignedSVD


def _on_the_flip() -> torch.Tensor:
    """A (5, 2) matrix whose second left singular vector has U[0, 1] = 0 exactly: the
    convention flips that vector's sign between x[0, j] + h and x[0, j] - h."""
    gen = torch.Generator().manual_seed(4)
    q, _ = torch.linalg.qr(torch.randn(4, 2, generator=gen, dtype=torch.float64))
    u = torch.zeros(5, 2, dtype=torch.float64)
    u[0, 0], u[1:, 0] = 0.6, 0.8 * q[:, 0]
    u[1:, 1] = q[:, 1]
    v, _ = torch.linalg.qr(torch.randn(2, 2, generator=gen, dtype=torch.float64))
    return u @ torch.diag(torch.tensor([2.0, 0.7], dtype=torch.float64)) @ v.mT


def test_the_flip_is_real_and_the_backward_is_torchs():
    x = _on_the_flip()
    h = 1e-6
    e = torch.zeros_like(x)
    e[0, 1] = h
    up, down = _signed_svd(x + e)[0][:, 1], _signed_svd(x - e)[0][:, 1]
    assert float((up - down).abs().max()) > 0.5  # a flip, not a derivative
    # independent reference: torch's SVD autograd through a sign-invariant loss
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(5, 5, dtype=torch.float64, generator=gen)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()

    def loss(u, s):
        return (u.mT @ w @ u).diagonal().sum() + s.pow(3).sum()

    u_ref, s_ref, _ = torch.linalg.svd(a, full_matrices=False)
    (want,) = torch.autograd.grad(loss(u_ref, s_ref), a)
    u_got, s_got, _ = _svd_function().apply(b)
    (got,) = torch.autograd.grad(loss(u_got, s_got), b)
    torch.testing.assert_close(got, want)


def test_a_correct_svd_across_a_sign_flip_passes():
    report = gradsmith.check(_svd_function(), _on_the_flip(), compat=False)
    assert report.passed, str(report)
    notes = {f.details["output"]: f.details["axes"] for f in report.findings
             if f.code == "gauge-aligned"}
    assert notes == {"out[0]": ["columns"], "out[2]": ["columns", "rows"]}


@pytest.mark.parametrize("bug", ["factor", "dropped"])
def test_a_wrong_svd_backward_still_fails(bug):
    report = gradsmith.check(_svd_function(bug), _on_the_flip(), compat=False)
    assert not report.passed
    assert "gradient-mismatch" in report.codes()


def _hermitian_eigh(bug: str | None = None):
    class HermitianEigh(Function):
        @staticmethod
        def forward(ctx, a):
            a = (a + a.mH) / 2  # every entry read: finite differences see all of them
            ctx.save_for_backward(a)
            return torch.linalg.eigh(a)

        @staticmethod
        @once_differentiable
        def backward(ctx, gvals, gvecs):
            (a,) = ctx.saved_tensors
            vals, vecs = torch.linalg.eigh(a)
            if bug == "conj":  # the eigenvectors' term taken without its conjugate
                gvecs = gvecs.conj()
            # eigh's own backward (torch), on the phase-invariant part of the cotangent
            inner = vecs.mH @ gvecs
            inner = inner - torch.diag_embed(1j * inner.diagonal(dim1=-2, dim2=-1).imag)
            gap = vals.unsqueeze(-2) - vals.unsqueeze(-1)
            gap = torch.where(gap == 0, torch.inf, gap)
            middle = torch.diag_embed(gvals.to(a.dtype)) + (inner - inner.mH) / 2 / gap
            g = vecs @ middle @ vecs.mH
            return (g + g.mH) / 2  # through the Hermitian part forward takes

    return HermitianEigh


def _hermitian() -> torch.Tensor:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 3, dtype=torch.complex128, generator=gen)
    return x + x.mH


def test_complex_eigenvectors_are_compared_through_their_phase():
    a = _hermitian()
    # independent reference: torch.linalg.eigh autograd through a phase-invariant loss
    gen = torch.Generator().manual_seed(6)
    w = torch.randn(3, 3, dtype=torch.complex128, generator=gen)
    w = w + w.mH
    left, right = a.clone().requires_grad_(), a.clone().requires_grad_()

    def loss(vals, vecs):
        return ((vecs.mH @ w @ vecs).diagonal().real * vals).sum()

    (want,) = torch.autograd.grad(loss(*torch.linalg.eigh((left + left.mH) / 2)), left)
    (got,) = torch.autograd.grad(loss(*_hermitian_eigh().apply(right)), right)
    torch.testing.assert_close(got, want)
    report = gradsmith.check(_hermitian_eigh(), a, compat=False)
    assert report.passed, str(report)
    assert "gauge-aligned" in {f.code for f in report.findings}
    wrong = gradsmith.check(_hermitian_eigh("conj"), a, compat=False)
    assert not wrong.passed and "gradient-mismatch" in wrong.codes()


def test_only_orthonormal_outputs_are_aligned():
    x = torch.tensor([[3.0, 1.0], [1.0, 2.0], [0.5, 0.0]], dtype=torch.float64)
    q = torch.linalg.qr(x)[0]
    problem = Problem(lambda xs, fresh: [xs[0], xs[0] @ q.mT, xs[0].sum(0)], [q], ["q"])
    assert gauge.orthonormal_axes(problem) == {0: [("columns", None)]}
    plain = Problem(lambda xs, fresh: [xs[0] * 2], [x], ["x"])
    assert gauge.orthonormal_axes(plain) == {}
    assert gauge.aligned(plain, {}) is plain


def _rank_deficient(x: torch.Tensor):
    """U (5, 5) of a (5, 2) matrix from the eigenvectors of x x^T: three zero singular
    values, whose vectors may rotate freely among themselves."""
    vals, vecs = torch.linalg.eigh(x @ x.mT)
    return vecs, vals.clamp_min(0).sqrt()


def test_vectors_of_a_repeated_value_are_not_compared():
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(5, 2, dtype=torch.float64, generator=gen)
    problem = Problem(lambda xs, fresh: list(_rank_deficient(xs[0])), [x], ["x"])
    plan = gauge.orthonormal_axes(problem)
    assert list(plan) == [0] and plan[0][0][0] == "columns"
    assert plan[0][0][1].tolist() == [True, True, True, False, False]
