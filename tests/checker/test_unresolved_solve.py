"""An iterative solve that collapses off its domain is unchecked there, not an estimator (issue
18, corpus 9a held-out: lattice_ml ``SolveLambdaSUN``, judged correct, was called
``undeclared-estimator``). Forward clamps its scales to ``eps`` and solves
``sum_j atan(y / s_j) = theta`` by Newton steps; backward is the implicit function theorem's.
On synthesised scales with negative entries the clamp makes the solution about ``1e-16``
wherever the input is moved: finite differences are exactly 0 at every step while backward is
not. The row is now INCOMPLETE, naming the loop; on scales in the solve's domain backward
PASSes and equals autograd through the unrolled iteration (the independent reference), and a
backward with a wrong factor FAILs there. A piecewise-constant forward with a made-up backward
and no refining loop keeps its ``undeclared-estimator``.

Reduced case written here.
"""

from __future__ import annotations

import importlib.util
import sys

import torch

import gradsmith
from gradsmith.discovery.synthesize import synthesize

SOURCE = """
import torch
from torch.autograd import Function


def _solve(s, theta, n_iter, eps):
    y = theta / (1 / s).sum(-1)
    for _ in range(n_iter):
        f = torch.atan(y[..., None] / s).sum(-1) - theta
        fp = (s / (s * s + y[..., None] ** 2)).sum(-1)
        y = y - f / fp
    return y


class AtanSolve(Function):
    @staticmethod
    def forward(ctx, s, theta, n_iter=30, eps=1e-16):
        s = s.clamp_min(eps)
        y = _solve(s, theta, n_iter, eps)
        ctx.save_for_backward(y, s)
        return y

    @staticmethod
    def backward(ctx, g):
        y, s = ctx.saved_tensors
        d = s * s + y[..., None] ** 2
        fp = (s / d).sum(-1)
        grad_s = {factor} * (y[..., None] / d) * (g / fp)[..., None]
        return grad_s, g / fp, None, None


class ShiftedSolve(Function):
    @staticmethod
    def forward(ctx, s, theta, k):
        s = s.clamp_min(1e-16)
        y = _solve(s, theta, 30, 1e-16)
        ctx.save_for_backward(y, s)
        return y + k

    @staticmethod
    def backward(ctx, g):
        y, s = ctx.saved_tensors
        d = s * s + y[..., None] ** 2
        fp = (s / d).sum(-1)
        return (y[..., None] / d) * (g / fp)[..., None], g / fp, torch.zeros_like(g)


class Rounded(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx, g):
        return 3 * g
"""


def _load(tmp_path, stem: str, factor: str = "1"):
    path = tmp_path / f"{stem}.py"
    path.write_text(SOURCE.replace("{factor}", factor))
    spec = importlib.util.spec_from_file_location(f"unresolved_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _in_domain():
    s = torch.tensor([[2.0, 1.5, 0.8], [1.7, 1.1, 0.9]], dtype=torch.float64,
                     requires_grad=True)
    theta = torch.tensor([0.4, -0.3], dtype=torch.float64, requires_grad=True)
    return s, theta


def test_a_collapsed_solve_is_incomplete_and_checked_in_its_domain(tmp_path):
    module = _load(tmp_path, "right")
    fn = module.AtanSolve
    args = synthesize(fn).args
    assert bool((args[0] < 0).any())  # the synthesised scales leave the solve's domain
    torch.manual_seed(0)
    report = gradsmith.check(fn, *args, compat=False)
    assert not report.passed and "undeclared-estimator" not in report.codes(), report
    (unresolved,) = [f for f in report.incomplete if f.code == "check-incomplete"]
    assert unresolved.details["refined"] == "y" and "_solve" in unresolved.message

    # In its domain backward is checked and holds; the reference is autograd through the
    # unrolled Newton steps (no implicit function theorem in it).
    s, theta = _in_domain()
    torch.manual_seed(0)
    assert gradsmith.check(fn, s, theta, compat=False).passed
    w = torch.tensor([0.3, -1.2], dtype=torch.float64)
    got = torch.autograd.grad((fn.apply(s, theta) * w).sum(), [s, theta])
    want = torch.autograd.grad((module._solve(s, theta, 30, 1e-16) * w).sum(), [s, theta])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)

    # A wrong backward still FAILs where the solve resolves, and is never PASSed off it; a
    # rounding with a made-up backward (no refining loop) stays an estimator.
    module = _load(tmp_path, "wrong", factor="2")
    s, theta = _in_domain()
    torch.manual_seed(0)
    report = gradsmith.check(module.AtanSolve, s, theta, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report
    torch.manual_seed(0)
    zero_config = gradsmith.check(module.AtanSolve, *synthesize(module.AtanSolve).args,
                                  compat=False)
    assert not zero_config.passed
    torch.manual_seed(0)
    rounded = gradsmith.check(module.Rounded, *synthesize(module.Rounded).args, compat=False)
    assert "undeclared-estimator" in rounded.codes("error"), rounded


def test_a_missing_gradient_beside_a_collapsed_solve_still_fails(tmp_path):
    # forward moves with k (finite differences 1) while backward returns 0 for it: that is
    # a mismatch the collapsed solve of s does not explain, and stays an error
    module = _load(tmp_path, "shifted")
    s = torch.tensor([[1.5, -0.3, 0.6], [-1.1, 0.4, 0.8]], dtype=torch.float64,
                     requires_grad=True)
    theta = torch.tensor([0.4, -0.3], dtype=torch.float64, requires_grad=True)
    k = torch.tensor([0.2, 0.7], dtype=torch.float64, requires_grad=True)
    torch.manual_seed(0)
    report = gradsmith.check(module.ShiftedSolve, s, theta, k, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report
    assert any(f.input == "k" for f in report.errors if f.code == "gradient-mismatch"), report
