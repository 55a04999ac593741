"""Arguments followed into another class's static method or a module-level function.

Real code shares one implementation among several Functions: ``sym_logm.forward`` hands its
matrix to ``sym_modeig.forward``, which takes ``eigh`` of it. Zero-config synthesis must read
that call as if it were forward's own, so the matrix gets symmetric positive definite values
(a general random tensor makes eigh read one triangle of a non-symmetric matrix, and the
correct backward fails).
"""

from __future__ import annotations

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.discovery.formula_domains import read_formula_domains
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.matrices import read_matrices
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _daleckii_krein(s, U, g, fun, fun_grad):
    """grad of U f(s) U^T along symmetric directions: U (L o U^T sym(g) U) U^T."""
    fs, dfs = fun(s), fun_grad(s)
    diff = s.unsqueeze(-1) - s.unsqueeze(-2)
    close = diff.abs() < 1e-12
    loewner = torch.where(close, dfs.unsqueeze(-1).expand_as(diff),
                          (fs.unsqueeze(-1) - fs.unsqueeze(-2)) / torch.where(close, 1, diff))
    sym = 0.5 * (g + g.transpose(-1, -2))
    return U @ (loewner * (U.transpose(-1, -2) @ sym @ U)) @ U.transpose(-1, -2)


class sym_modeig:  # noqa: N801 - the shared-implementation shape real code uses
    """One eigen-function implementation shared by several Functions (plain class)."""

    @staticmethod
    def forward(ctx, M, fun, ensure_symmetric=False):
        if ensure_symmetric:
            M = 0.5 * (M + M.transpose(-1, -2))
        s, U = torch.linalg.eigh(M)
        ctx.save_for_backward(s, U)
        return U @ torch.diag_embed(fun(s)) @ U.transpose(-1, -2)

    @staticmethod
    def backward(ctx, g, fun, fun_grad, scale=1.0):
        s, U = ctx.saved_tensors
        return scale * _daleckii_krein(s, U, g, fun, fun_grad)


class sym_logm(Function):  # noqa: N801
    @staticmethod
    def value(s):
        return torch.log(s)

    @staticmethod
    def derivative(s):
        return 1 / s

    @staticmethod
    def forward(ctx, M, ensure_symmetric=False):
        return sym_modeig.forward(ctx, M, sym_logm.value, ensure_symmetric)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return sym_modeig.backward(ctx, g, sym_logm.value, sym_logm.derivative), None


class sym_logm_wrong(Function):  # noqa: N801
    """The same, with a backward a factor 2 off."""

    @staticmethod
    def forward(ctx, M, ensure_symmetric=False):
        return sym_modeig.forward(ctx, M, sym_logm.value, ensure_symmetric=ensure_symmetric)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return sym_modeig.backward(ctx, g, sym_logm.value, sym_logm.derivative, 2.0), None


def _eig_log(s, U):
    return U @ torch.diag_embed(torch.log(s)) @ U.transpose(-1, -2)


def test_a_matrix_handed_to_another_class_static_method_gets_spd_values():
    found = synthesize(sym_logm)
    assert isinstance(found, Synthesized), found
    M = found.args[0]
    assert M.dim() >= 2 and M.shape[-1] == M.shape[-2]
    torch.testing.assert_close(M, M.transpose(-1, -2))
    assert bool((torch.linalg.eigvalsh(M) > 0).all())
    # the backward is right on these inputs: autograd through eigh is the reference
    X = M.detach().clone().requires_grad_(True)
    g = torch.randn(M.shape, dtype=M.dtype, generator=torch.Generator().manual_seed(0))
    g = g + g.transpose(-1, -2)
    (reference,) = torch.autograd.grad(_eig_log(*torch.linalg.eigh(X)), X, g)
    Y = M.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(sym_logm.apply(Y), Y, g)
    torch.testing.assert_close(0.5 * (got + got.mT), 0.5 * (reference + reference.mT))
    assert gradsmith.check(sym_logm, *found.args).passed
    wrong = synthesize(sym_logm_wrong)
    assert isinstance(wrong, Synthesized), wrong
    assert "gradient-mismatch" in gradsmith.check(sym_logm_wrong, *wrong.args).codes("error")


def _cholesky_of(A):
    return torch.linalg.cholesky(A)


def _shared_solve(B, rhs, *, fun=None):
    return torch.cholesky_solve(rhs, _cholesky_of(A=B)), torch.linalg.eigvalsh(B)


def _recursive(x, n):
    return x if n == 0 else _recursive(x, n - 1)


class _Shared(Function):
    @staticmethod
    def forward(ctx, P, b, other):
        _recursive(other, 3)
        return _shared_solve(rhs=b, B=P)[0]


def test_readers_follow_parameters_into_module_functions_by_keyword_and_levels_deep():
    hints = {"P": Hint(), "b": Hint(), "other": Hint()}
    read_matrices(_Shared, hints)  # cholesky two calls down, passed by keyword
    assert (hints["P"].matrix, hints["b"].matrix, hints["other"].matrix) == ("spd", None, None)
    hints = {"P": Hint(), "b": Hint(), "other": Hint()}
    read_formula_domains(_Shared.forward, _Shared, hints)  # eigvalsh one call down
    assert (hints["P"].matrix, hints["b"].matrix, hints["other"].matrix) == ("spd", None, None)
