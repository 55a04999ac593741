"""A backward meant for symmetric inputs whose gradient is in no convention (issue 18).

peps-torch's ``SYMEIG`` (reduced here, written anew) returns ``U (diag(dD) + F o U^T dU) U^T``
for ``eigh`` sorted by ``|D|``: right along every symmetric direction, not symmetric, not
triangular. The code says its input is a symmetric matrix (``eigh``, the docstring), so it is
compared along symmetric directions, and a backward wrong along them still fails.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith


def _eigh_sorted(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d, u = torch.linalg.eigh(a)
    p = torch.sort(d.abs(), descending=True).indices
    return d[p], u[:, p]


def _sym_eig(bug: str | None = None) -> type[Function]:
    class SymEig(Function):
        @staticmethod
        def forward(ctx, a):
            d, u = _eigh_sorted(a)
            ctx.save_for_backward(d, u)
            return d, u

        @staticmethod
        def backward(ctx, dd, du):
            d, u = ctx.saved_tensors
            f = d - d[:, None] if bug != "sign" else d[:, None] - d
            f = f / (f ** 2 + 1e-30)
            f.diagonal().fill_(0)
            inner = torch.diag(dd) * (2 if bug == "factor" else 1) + f * (u.t() @ du)
            return u @ inner @ u.t()

    return SymEig


def _matrix() -> torch.Tensor:
    gen = torch.Generator().manual_seed(11)
    q, _ = torch.linalg.qr(torch.randn(5, 5, generator=gen, dtype=torch.float64))
    d = torch.tensor([5.0, -3.7, 2.9, -1.6, 0.9], dtype=torch.float64)  # distinct |d|
    return q @ torch.diag(d) @ q.t()


def _along_symmetric(fn, a: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(backward's, eigh autograd's) gradient folded onto symmetric directions G + G^T."""
    gen = torch.Generator().manual_seed(seed)
    gd = torch.randn(a.shape[0], generator=gen, dtype=torch.float64)
    gu = torch.randn(a.shape, generator=gen, dtype=torch.float64)
    x, y = a.clone().requires_grad_(), a.clone().requires_grad_()
    d, u = _eigh_sorted(x)
    (want,) = torch.autograd.grad((d * gd).sum() + (u * gu).sum(), x)
    d, u = fn.apply(y)
    (got,) = torch.autograd.grad((d * gd).sum() + (u * gu).sum(), y)
    return got + got.t(), want + want.t()


def test_a_symmetric_eigh_backward_in_no_convention_passes():
    fn, a = _sym_eig(), _matrix()
    got, want = _along_symmetric(fn, a, 3)
    torch.testing.assert_close(got, want)  # right along every symmetric direction
    # ...but in no convention: neither symmetric nor 0 on a strict triangle, so only the
    # code's word (eigh, "symmetric") lets it be compared along symmetric directions
    y = a.clone().requires_grad_()
    gen = torch.Generator().manual_seed(4)
    (raw,) = torch.autograd.grad((fn.apply(y)[1] * torch.randn(
        a.shape, generator=gen, dtype=torch.float64)).sum(), y)
    assert not torch.allclose(raw, raw.t())
    assert bool((raw.triu(1) != 0).any()) and bool((raw.tril(-1) != 0).any())
    report = gradsmith.check(fn, a, compat=False)
    assert report.passed, str(report)
    notes = [f for f in report.findings if f.code == "symmetric-directions"]
    assert notes and notes[0].details["triangle"] == "lower", str(report)


@pytest.mark.parametrize("bug", ["sign", "factor"])
def test_a_planted_wrong_symmetric_backward_still_fails(bug):
    fn, a = _sym_eig(bug), _matrix()
    got, want = _along_symmetric(fn, a, 5)
    assert not torch.allclose(got, want, rtol=1e-3, atol=1e-6)  # wrong along symmetric dirs
    report = gradsmith.check(fn, a, compat=False)
    assert not report.passed
    assert "gradient-mismatch" in {f.code for f in report.findings}, str(report)


ZERO_CONFIG = '''
import torch
from torch.autograd import Function


class SymEig(Function):
    @staticmethod
    def forward(ctx, a):
        d, u = torch.linalg.eigh(a)
        p = torch.sort(d.abs(), descending=True).indices
        d, u = d[p], u[:, p]
        ctx.save_for_backward(d, u)
        return d, u

    @staticmethod
    def backward(ctx, dd, du):
        d, u = ctx.saved_tensors
        f = d - d[:, None]
        f = f / (f ** 2 + 1e-30)
        f.diagonal().fill_(0)
        return u @ (torch.diag(dd) + f * (u.t() @ du)) @ u.t()


class WrongSymEig(SymEig):
    @staticmethod
    def backward(ctx, dd, du):
        d, u = ctx.saved_tensors
        f = d[:, None] - d
        f = f / (f ** 2 + 1e-30)
        f.diagonal().fill_(0)
        return u @ (torch.diag(dd) + f * (u.t() @ du)) @ u.t()
'''


def test_zero_config_eigh_is_compared_along_symmetric_directions(tmp_path, monkeypatch, capsys):
    from gradsmith.cli import main

    (tmp_path / "eig.py").write_text(ZERO_CONFIG)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "eig.py", "--no-isolate", "--no-compat"])
    out = capsys.readouterr().out
    rows = {name: next(line for line in out.splitlines() if f"::{name} " in line)
            for name in ("SymEig", "WrongSymEig")}
    assert code != 0, out
    assert "PASS" in rows["SymEig"], out
    assert "FAIL" in rows["WrongSymEig"], out
