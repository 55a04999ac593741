"""A gradient mismatch that shrinks as forward's iteration count grows is convergence, not a
defect (issue 18, corpus 11b's pytorch-toolbelt ComputeNormalization: 5 bisection steps by
default, backward the implicit-function derivative of the exact solution). Reduced case,
written here: a cube root by bisection with ``n_steps``, backward ``g / (3 y^2)``; a planted
wrong backward (``g / (2 y^2)``) still mismatches at 16x the count and keeps its FAIL."""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.checker.iterations import converged, iteration_positions


def _bisect(x, n_steps):
    lower, upper = torch.zeros_like(x), x + 1.0  # x > 0: the root lies in [0, x + 1]
    for _ in range(n_steps):
        middle = (lower + upper) / 2
        below = middle ** 3 < x
        lower = torch.where(below, middle, lower)
        upper = torch.where(below, upper, middle)
    return (lower + upper) / 2


class CubeRoot(Function):
    @staticmethod
    def forward(ctx, x, n_steps):
        y = _bisect(x, n_steps)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (3 * y ** 2), None  # the exact root's derivative


class WrongCubeRoot(CubeRoot):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (2 * y ** 2), None  # planted: the wrong power rule


def _x():
    return (torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            + 0.5).requires_grad_()


def _recheck(cls):
    return lambda sets: gradsmith.check(cls, *sets[0][1], compat=False)


def test_the_count_bounding_a_helpers_loop_is_found():
    assert iteration_positions(CubeRoot, (_x(), 5)) == [1]
    assert iteration_positions(CubeRoot, (_x(), True)) == []  # a flag is no count


def test_a_mismatch_that_converges_is_a_pass_with_a_warning():
    x = _x()
    first = gradsmith.check(CubeRoot, x, 5, compat=False)
    assert "gradient-mismatch" in first.codes("error")  # 5 steps: forward far from the root
    found = converged(_recheck(CubeRoot), [("x", (x, 5))], [1], first, ["x", "n_steps"])
    assert found is not None and found.passed
    assert "inexact-iterations" in found.codes("warning")
    assert any("n_steps=5" in f.message for f in found.findings)
    # independent reference: the closed-form derivative of the cube root
    y = CubeRoot.apply(x, 80)
    (got,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(got, x.detach() ** (-2 / 3) / 3)


def test_a_planted_wrong_backward_still_fails():
    x = _x()
    first = gradsmith.check(WrongCubeRoot, x, 5, compat=False)
    assert "gradient-mismatch" in first.codes("error")
    assert converged(_recheck(WrongCubeRoot), [("x", (x, 5))], [1], first,
                     ["x", "n_steps"]) is None
