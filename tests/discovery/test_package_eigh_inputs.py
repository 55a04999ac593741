"""A Function of a symmetric matrix whose ``eigh`` sits in a helper of another module of its
package (corpus 14 dev, issue 18: spd_learn's ``matrix_log``, ``matrix_sqrt``... call
``modeig_forward(X, fn)`` imported ``from .autograd``). The formula-domain reader did not follow
calls out of the Function's module, so ``X`` was drawn as a random non-symmetric tensor and the
correct Daleckii-Krein backward (the symmetric representative of the gradient) failed entry by
entry. Followed into the package's helper, ``X`` is drawn symmetric positive definite and the
gradient compared along symmetric directions; a planted wrong backward still fails. Reduced case
written here.
"""

from __future__ import annotations

import sys

import pytest
import torch
from source_cases import write

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source
from gradsmith.discovery.collect import load_module

HELPERS = """
    import torch


    def modeig_forward(X, fn):
        s, U = torch.linalg.eigh(X)
        return U @ torch.diag_embed(fn(s)) @ U.transpose(-1, -2), s, U


    def modeig_backward(g, s, U, fn, derivative):
        gaps = s.unsqueeze(-1) - s.unsqueeze(-2)
        same = gaps.abs() < 1e-10
        f = fn(s)
        L = (f.unsqueeze(-1) - f.unsqueeze(-2)) / torch.where(same, torch.ones_like(gaps), gaps)
        d = derivative(s)
        L = torch.where(same, 0.5 * (d.unsqueeze(-1) + d.unsqueeze(-2)), L)
        if BUG == "dropped":  # the Daleckii-Krein off-diagonal terms dropped
            L = torch.diag_embed(d)
        sym = (g + g.transpose(-1, -2)) / 2
        if BUG == "unhalved":  # g + g^T without the half: twice the gradient
            sym = g + g.transpose(-1, -2)
        out = U @ (L * (U.transpose(-1, -2) @ sym @ U)) @ U.transpose(-1, -2)
        if BUG == "triangle":  # one triangle kept, not folded: wrong along E_ij + E_ji
            out = torch.tril(out)
        return out
"""
CORE = """
    import torch
    from torch.autograd import Function

    from .spectral import modeig_backward, modeig_forward


    class MatLog(Function):
        @staticmethod
        def forward(ctx, X):
            out, s, U = modeig_forward(X, torch.log)
            ctx.save_for_backward(s, U)
            return out

        @staticmethod
        def backward(ctx, g):
            s, U = ctx.saved_tensors
            return modeig_backward(g, s, U, torch.log, torch.reciprocal)
"""


@pytest.fixture(autouse=True)
def _forget(monkeypatch):
    """Each test writes its own ``eigpkg``: drop it from the import cache afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] == "eigpkg":
            del sys.modules[name]


def _package(tmp_path, bug: str) -> str:
    pkg = tmp_path / "proj" / "eigpkg"
    write(pkg / "__init__.py", "")
    write(pkg / "spectral.py", HELPERS.replace("BUG", repr(bug)))
    return write(pkg / "core.py", CORE)


def _reference_agrees(path: str) -> bool:
    """The file's backward against autograd of logm through eigh, along symmetric directions
    (the tangent space of the symmetric matrices the code is written for)."""
    module = load_module("file", path)
    gen = torch.Generator().manual_seed(3)
    b = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    a = b @ b.T / 5 + torch.eye(5, dtype=torch.float64)
    g = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    x = a.clone().requires_grad_()
    (got,) = torch.autograd.grad((module.MatLog.apply(x) * g).sum(), x)
    y = a.clone().requires_grad_()
    s, u = torch.linalg.eigh((y + y.T) / 2)
    (want,) = torch.autograd.grad(((u @ torch.diag(s.log()) @ u.T) * g).sum(), y)
    d = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    d = d + d.T  # a symmetric direction
    return bool(torch.isclose((got * d).sum(), (want * d).sum(), rtol=1e-8, atol=1e-10))


@pytest.mark.parametrize("bug", ["none", "dropped", "unhalved", "triangle"])
def test_an_eigh_in_a_package_helper_makes_the_input_spd(tmp_path, monkeypatch, bug):
    path = _package(tmp_path, bug)
    assert _reference_agrees(path) is (bug == "none")
    monkeypatch.chdir(tmp_path / "proj")
    (row,) = run_check([Source("file", path, "eigpkg/core.py")], isolate=False).rows
    assert "symmetric positive definite" in row["inputs"]
    errors = {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}
    if bug == "none":
        assert row["verdict"] == "pass", row["report"]["findings"]
    else:
        assert row["verdict"] == "fail" and "gradient-mismatch" in errors
