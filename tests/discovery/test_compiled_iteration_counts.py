"""A forward that solves by a fixed number of iterations inside a compiled extension, with a
backward exact at its output, is a correct Function at a coarse count (inexact-iterations), not
an undeclared estimator (issue 18, corpus 13c held-out: Thesis EntmaxNsectFunction, an
n-section entmax in C++ whose backward is the entmax Jacobian at the output, was called a
truncated backward). The extension is modelled by an opaque callable in a module object (no
Python source gradsmith can read); the loop count is found by measuring convergence. Reduced
cases, written here; the planted wrong backward FAILs."""

import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import types

import torch


class _Bisect:
    """y with y + y**3 = x, by n_iter bisection steps and a secant in the last bracket (a
    compiled kernel's stand-in: smooth in x, exact only as n_iter grows)."""

    def __call__(self, x, n_iter):
        low, high = -x.abs() - 1, x.abs() + 1
        for _ in range(n_iter):
            mid = (low + high) / 2
            above = mid + mid ** 3 > x
            high, low = torch.where(above, mid, high), torch.where(above, low, mid)
        f_low, f_high = low + low ** 3, high + high ** 3  # the secant in the last bracket
        return low + (x - f_low) * (high - low) / (f_high - f_low)


root_ext = types.ModuleType("root_ext")
root_ext.bisect = _Bisect()


class CubicRoot(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n_iter=5):
        y = root_ext.bisect(x, n_iter)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (1 + {k} * y ** 2), None
'''
RIGHT = {"k": "3"}
WRONG = {"k": "2"}  # planted: the implicit derivative's coefficient wrong


def _exact_root(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    for _ in range(60):  # Newton on y + y^3 - x, converged in float64
        y = y - (y + y ** 3 - x) / (1 + 3 * y ** 2)
    return y


def test_the_reduced_backward_is_the_implicit_gradient_of_the_converged_solve(tmp_path):
    path = tmp_path / "compiled_count_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "compiled_count_case")
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    (got,) = torch.autograd.grad(module.CubicRoot.apply(x, 80), x, g)
    y = _exact_root(x.detach())
    torch.testing.assert_close(module.CubicRoot.apply(x, 80).detach(), y)
    # independent: the inverse function's derivative by central differences of x = y + y^3
    h = 1e-6
    slope = (2 * h) / (((y + h) + (y + h) ** 3) - ((y - h) + (y - h) ** 3))
    torch.testing.assert_close(got, g * slope, rtol=1e-7, atol=1e-9)


def test_a_count_the_extension_takes_converges_and_the_planted_wrong_backward_fails(tmp_path):
    row = check_rows(tmp_path / "compiled_count_right.py", SOURCE.format(**RIGHT))["CubicRoot"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    codes = {f["code"] for f in row["report"]["findings"]}
    assert "inexact-iterations" in codes and "undeclared-estimator" not in codes, codes
    row = check_rows(tmp_path / "compiled_count_wrong.py", SOURCE.format(**WRONG))["CubicRoot"]
    assert row["verdict"] == "fail", row["reason"]
    assert "gradient-mismatch" in error_codes(row), error_codes(row)
