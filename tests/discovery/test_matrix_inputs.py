"""Zero-config matrices with the structure a Function's linear algebra needs (issue 18,
held-out class "structured linear-algebra inputs": gpytorch's triangular solves, Cholesky
factors and symmetric quadratic forms got no inputs, pyro's scale_tril a vector). Reduced
cases, written here; before, every layout failed (a solve needs a square matrix) or a random
matrix was given where the code is written for a symmetric one."""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def _triangular(tril_grad: bool):
    class TriangularSolve(Function):
        """x = L^{-1} b for a lower-triangular L; the upper triangle is never read."""

        @staticmethod
        def forward(ctx, chol, b):
            x = torch.linalg.solve_triangular(chol, b, upper=False)
            ctx.save_for_backward(chol, x)
            return x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            L, x = ctx.saved_tensors
            gb = torch.linalg.solve_triangular(L.mT, g, upper=True)
            gl = -gb @ x.mT
            return (gl.tril() if tril_grad else gl), gb

    return TriangularSolve


class SpdSolve(Function):
    """x = A^{-1} b through a Cholesky factor of A (symmetric positive definite)."""

    @staticmethod
    def forward(ctx, a, b):
        L = torch.linalg.cholesky(a)
        x = torch.cholesky_solve(b, L)
        ctx.save_for_backward(L, x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        L, x = ctx.saved_tensors
        gb = torch.cholesky_solve(g, L)
        ga = -gb @ x.mT
        return ga, gb


def _quadratic(factor: float):
    class QuadForm(Function):
        @staticmethod
        def forward(ctx, matrix, rhs):
            """diag(B^T A B).

            :param matrix: A symmetric matrix of size `(..., M, M)`.
            :param rhs: The right-hand side of size `(..., M, N)`.
            """
            product = matrix @ rhs
            ctx.save_for_backward(rhs, product)
            return torch.sum(rhs * product, dim=-2)

        @staticmethod
        @once_differentiable
        def backward(ctx, d):
            rhs, product = ctx.saved_tensors
            # relies on the symmetry: d/dB diag(B^T A B) = (A + A^T) B = 2 A B
            return rhs @ (d.unsqueeze(-1) * rhs.mT), factor * product * d.unsqueeze(-2)

    return QuadForm


def test_a_triangular_solve_gets_a_lower_triangular_matrix_and_a_correct_one_passes():
    right = _triangular(tril_grad=True)
    chol, b = _found(right).args
    assert chol.shape[-1] == chol.shape[-2] == b.shape[-2]
    assert torch.equal(chol, chol.tril()) and bool((chol.diagonal() >= 1).all())
    g = torch.randn_like(b)
    got = torch.autograd.grad(right.apply(chol, b), (chol, b), g)
    # reference: autograd of the same solve, the upper triangle never read (tril of it)
    reference = torch.autograd.grad(
        torch.linalg.solve_triangular(chol.tril(), b, upper=False), (chol, b), g)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(right, chol, b).passed


def test_a_gradient_for_the_triangle_a_solve_never_reads_is_caught():
    wrong = _triangular(tril_grad=False)
    chol, b = _found(wrong).args
    # by hand: the upper triangle does not change the output, yet gets a gradient
    (got,) = torch.autograd.grad(wrong.apply(chol, b).sum(), chol)
    assert bool(got.triu(1).abs().gt(0).any())
    report = gradsmith.check(wrong, chol, b)
    assert not report.passed
    # zero where finite differences see none, nonzero elsewhere: an estimator's signature
    assert report.codes("error") & {"gradient-mismatch", "undeclared-estimator"}


def test_a_cholesky_gets_a_positive_definite_matrix():
    a, b = _found(SpdSolve).args
    assert a.shape[-1] == a.shape[-2] == b.shape[-2]
    assert bool((torch.linalg.eigvalsh(a) > 0).all()) and torch.equal(a, a.mT)
    x = SpdSolve.apply(a, b)
    torch.testing.assert_close(x, torch.linalg.solve(a, b))


def test_a_documented_symmetric_matrix_is_symmetric_and_a_missing_factor_is_caught():
    right, wrong = _quadratic(2.0), _quadratic(1.0)
    found = _found(right)
    matrix, rhs = found.args
    assert "symmetric" in found.description and torch.equal(matrix, matrix.mT)
    d = torch.randn(rhs.shape[-1], dtype=torch.float64)
    got = torch.autograd.grad(right.apply(matrix, rhs), (matrix, rhs), d)
    reference = torch.autograd.grad(torch.diagonal(rhs.mT @ matrix @ rhs), (matrix, rhs), d)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(right, *found.args).passed
    assert "gradient-mismatch" in gradsmith.check(wrong, *found.args).codes("error")


class Precision(Function):
    """mean and Cholesky factor from natural parameters, through the class's own static
    helper (``cholesky(-2 * nat_covar)``: nat_covar negative definite)."""

    @staticmethod
    def _forward(nat_mean, nat_covar):
        covariance = torch.linalg.inv(-2.0 * nat_covar)
        return covariance @ nat_mean, torch.linalg.cholesky(-2.0 * nat_covar)

    @staticmethod
    def forward(ctx, nat_mean, nat_covar):
        mean, chol = Precision._forward(nat_mean, nat_covar)
        ctx.save_for_backward(nat_mean, nat_covar)
        return mean

    @staticmethod
    def backward(ctx, g):
        nat_mean, nat_covar = ctx.saved_tensors
        covariance = torch.linalg.inv(-2.0 * nat_covar)
        mean = covariance @ nat_mean
        return covariance.mT @ g, 2 * (covariance.mT @ g) @ mean.mT


def test_a_static_helper_of_the_class_is_read_too_and_a_negative_definite_matrix_made():
    found = _found(Precision)
    nat_mean, nat_covar = found.args
    assert "negative definite" in found.description
    assert bool((torch.linalg.eigvalsh(nat_covar) < 0).all())
    g = torch.randn(nat_covar.shape[-1], nat_mean.shape[-1], dtype=torch.float64)
    got = torch.autograd.grad(Precision.apply(nat_mean, nat_covar), (nat_mean, nat_covar), g)
    reference = torch.autograd.grad(torch.linalg.inv(-2.0 * nat_covar) @ nat_mean,
                                    (nat_mean, nat_covar), g)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(Precision, *found.args).passed
