"""Functions of symmetric matrices (``U diag(f(s)) U^T`` from ``torch.linalg.eigh``) return
the symmetric Daleckii-Krein gradient, eigh's own convention: eigh reads one triangle, so
one-entry finite differences put the whole derivative there. The checker compares along
symmetric directions instead; backwards wrong along them still fail."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith


def _divided(s: torch.Tensor, f, df) -> torch.Tensor:
    """Daleckii-Krein kernel: (f(s_i) - f(s_j)) / (s_i - s_j), f'(s_i) where they meet."""
    fs = f(s)
    ds = s.unsqueeze(-1) - s.unsqueeze(-2)
    close = ds.abs() <= 1e-12 * s.abs().max()
    quot = (fs.unsqueeze(-1) - fs.unsqueeze(-2)) / torch.where(close, torch.ones_like(ds), ds)
    mean = (df(s).unsqueeze(-1) + df(s).unsqueeze(-2)) / 2
    return torch.where(close, mean, quot)


def _spectral(f, df, bug: str | None = None):
    """A Function X -> U diag(f(s)) U^T with the Daleckii-Krein backward (or a planted bug)."""

    class Spectral(Function):
        @staticmethod
        def forward(ctx, x):
            s, u = torch.linalg.eigh(x)
            ctx.save_for_backward(s, u)
            return u @ torch.diag_embed(f(s)) @ u.mT

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            s, u = ctx.saved_tensors
            k = _divided(s, f, df)
            if bug == "factor":  # off-diagonal terms missing their factor of 1
                k = k * (0.5 + 0.5 * torch.eye(s.shape[-1], dtype=s.dtype))
            if bug == "formula":  # f'(s_j) instead of the divided difference
                k = df(s).unsqueeze(-2).expand_as(k)
            sym = (g + g.mT) / 2
            inner = k * (u.mT @ sym @ u)
            if bug == "transposed":  # U^T (...) U: eigenvectors transposed
                return u.mT @ inner @ u
            return u @ inner @ u.mT

    return Spectral


CASES = {
    "logm": (torch.log, lambda s: 1 / s),
    "sqrtm": (torch.sqrt, lambda s: 0.5 / torch.sqrt(s)),
    "pow1.7": (lambda s: s ** 1.7, lambda s: 1.7 * s ** 0.7),
}
SymLogm, SymSqrtm, SymPow = (_spectral(*CASES[k]) for k in CASES)


def _spd(*batch: int, n: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(*batch, n, n, generator=gen, dtype=torch.float64)
    return a @ a.mT / n + 0.5 * torch.eye(n, dtype=torch.float64)


def _reference(f, x: torch.Tensor) -> torch.Tensor:
    s, u = torch.linalg.eigh(x)
    return u @ torch.diag_embed(f(s)) @ u.mT


@pytest.mark.parametrize("name, fn", [("logm", SymLogm), ("sqrtm", SymSqrtm),
                                      ("pow1.7", SymPow)])
@pytest.mark.parametrize("batch", [(), (2,)], ids=["single", "batch"])
def test_a_correct_symmetric_backward_passes(name, fn, batch):
    x = _spd(*batch)
    f = CASES[name][0]
    # independent reference: autograd through torch.linalg.eigh, along a symmetric direction
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    gen = torch.Generator().manual_seed(5)
    g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    (want,) = torch.autograd.grad((_reference(f, a) * g).sum(), a)
    (got,) = torch.autograd.grad((fn.apply(b) * g).sum(), b)
    torch.testing.assert_close(got + got.mT, want + want.mT)
    report = gradsmith.check(fn, x, compat=False)
    assert report.passed, str(report)
    notes = [f for f in report.findings if f.code == "symmetric-directions"]
    assert notes and "symmetric directions" in notes[0].message
    assert notes[0].details["triangle"] == "lower"


def test_expm_agrees_with_matrix_exp_and_passes():
    """torch.linalg.matrix_exp (no eigh inside) is the independent reference for expm."""
    fn = _spectral(torch.exp, torch.exp)
    x = _spd(2)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    gen = torch.Generator().manual_seed(9)
    g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(fn.apply(b), torch.linalg.matrix_exp(x))
    (want,) = torch.autograd.grad((torch.linalg.matrix_exp(a) * g).sum(), a)
    (got,) = torch.autograd.grad((fn.apply(b) * g).sum(), b)
    torch.testing.assert_close(got + got.mT, want + want.mT)
    report = gradsmith.check(fn, x, compat=False)
    assert report.passed, str(report)


class CholLogdet(Function):
    """log det X through cholesky (reads the lower triangle); gradient X^-1, symmetric."""

    @staticmethod
    def forward(ctx, x):
        chol = torch.linalg.cholesky(x)
        ctx.save_for_backward(chol)
        return 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (chol,) = ctx.saved_tensors
        return g[..., None, None] * torch.cholesky_inverse(chol)


def test_a_cholesky_reader_passes_against_logdet():
    x = _spd(3)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.logdet(a).sum(), a)
    (got,) = torch.autograd.grad(CholLogdet.apply(b).sum(), b)
    torch.testing.assert_close(got, want)
    report = gradsmith.check(CholLogdet, x, compat=False)
    assert report.passed, str(report)
    assert "symmetric-directions" in {f.code for f in report.findings}


def test_the_upper_triangle_reader_is_folded_upward():
    class UpperLogm(Function):
        @staticmethod
        def forward(ctx, x):
            s, u = torch.linalg.eigh(x, UPLO="U")
            ctx.save_for_backward(s, u)
            return u @ torch.diag_embed(torch.log(s)) @ u.mT

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            s, u = ctx.saved_tensors
            k = _divided(s, torch.log, lambda s: 1 / s)
            return u @ (k * (u.mT @ ((g + g.mT) / 2) @ u)) @ u.mT

    report = gradsmith.check(UpperLogm, _spd(), compat=False)
    assert report.passed, str(report)
    notes = [f for f in report.findings if f.code == "symmetric-directions"]
    assert notes[0].details["triangle"] == "upper"


@pytest.mark.parametrize("bug", ["factor", "formula", "transposed"])
def test_a_backward_wrong_along_symmetric_directions_fails(bug):
    fn = _spectral(*CASES["logm"], bug=bug)
    x = _spd()
    # the bug is real along a symmetric direction: autograd through eigh disagrees
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    e = torch.zeros_like(x)
    e[1, 0] = e[0, 1] = 1.0
    (want,) = torch.autograd.grad((_reference(torch.log, a) * e).sum(), a)
    (got,) = torch.autograd.grad((fn.apply(b) * e).sum(), b)
    assert not torch.allclose(got + got.mT, want + want.mT, rtol=1e-3, atol=1e-6)
    report = gradsmith.check(fn, x, compat=False)
    assert not report.passed
    codes = {f.code for f in report.findings}
    assert "gradient-mismatch" in codes, str(report)
    if bug != "formula":  # its gradient is not symmetric: compared entry by entry
        # caught by the comparison along symmetric directions, not by the one-entry one
        assert "symmetric-directions" in codes, str(report)


def test_a_whole_matrix_reader_is_not_folded():
    """X @ X reads both triangles: an entry-wise gradient that only holds symmetrised
    (g X + X g, the symmetric convention's answer) is wrong for it and must fail."""

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x @ x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            sym = (g + g.mT) / 2
            return sym @ x + x @ sym

    x = _spd()
    a = x.clone().requires_grad_()
    gen = torch.Generator().manual_seed(7)
    g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    (want,) = torch.autograd.grad((a @ a * g).sum(), a)
    assert not torch.allclose(Square.backward(_Ctx(x), g), want)
    report = gradsmith.check(Square, x, compat=False)
    assert not report.passed
    assert "symmetric-directions" not in {f.code for f in report.findings}


def test_a_lower_triangle_reader_that_forgets_its_mask_still_fails():
    """tril(X) @ w reads the lower triangle; a backward without the tril mask returns a
    gradient in neither convention (not symmetric, not triangular): not folded, it keeps its
    diagnosis, the forgotten mask."""

    class TrilMatvec(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return torch.tril(x) @ w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g[:, None] * w[None, :], torch.tril(x).mT @ g

    x, w = _spd(), torch.linspace(0.5, 2.0, 4, dtype=torch.float64)
    a = x.clone().requires_grad_()
    (want,) = torch.autograd.grad((torch.tril(a) @ w).sum(), a)
    assert bool((want.triu(1) == 0).all())
    report = gradsmith.check(TrilMatvec, x, w, compat=False)
    assert not report.passed
    codes = {f.code for f in report.findings}
    assert "undeclared-estimator" in codes and "symmetric-directions" not in codes, str(report)
    assert "forgotten mask" in str(report)


class _Ctx:
    def __init__(self, *saved):
        self.saved_tensors = saved


ZERO_CONFIG = '''
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class SymLogm(Function):
    @staticmethod
    def forward(ctx, x):
        s, u = torch.linalg.eigh(x)
        ctx.save_for_backward(s, u)
        return u @ torch.diag_embed(torch.log(s)) @ u.mT

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        s, u = ctx.saved_tensors
        fs, ds = torch.log(s), s.unsqueeze(-1) - s.unsqueeze(-2)
        close = ds.abs() < 1e-12
        k = torch.where(close, 1 / s.unsqueeze(-1).expand_as(ds),
                        (fs.unsqueeze(-1) - fs.unsqueeze(-2))
                        / torch.where(close, torch.ones_like(ds), ds))
        return u @ (k * (u.mT @ ((g + g.mT) / 2) @ u)) @ u.mT
'''


def test_zero_config_synthesised_spd_input_passes_and_the_row_says_how(
        tmp_path, monkeypatch, capsys):
    from gradsmith.cli import main

    (tmp_path / "spectral.py").write_text(ZERO_CONFIG)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "spectral.py", "--no-isolate"])
    out = capsys.readouterr().out
    assert code == 0, out
    row = next(line for line in out.splitlines() if "SymLogm" in line)
    assert "PASS" in row and "gradients along symmetric directions" in " ".join(out.split())
