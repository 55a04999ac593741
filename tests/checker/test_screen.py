"""The random-direction screen (issue 18): a correct Function passes in a handful of forward
passes instead of two per element, and every bug that element-by-element differences catch
is still caught and located (a disagreeing direction hands over to them)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch.autograd import Function

import gradsmith

N = 300


def _x(n: int = N, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _counting(offsets: dict[int, float] | None = None, detach: bool = False) -> type:
    """``x * x`` counting its forward calls; backward ``2 x g`` plus ``offsets`` at given flat
    elements (times ``g``), or computed from a detached ``x`` (double backward silently 0)."""

    class CountedSquare(Function):
        calls = 0

        @staticmethod
        def forward(ctx, x):
            CountedSquare.calls += 1
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            grad = 2 * (x.detach() if detach else x) * g
            for j, off in (offsets or {}).items():
                grad = grad + torch.nn.functional.one_hot(
                    torch.tensor(j), x.numel()).to(g.dtype) * off * g
            return grad

    return CountedSquare


def test_correct_function_passes_in_few_forward_passes():
    fn = _counting()
    report = gradsmith.check(fn, _x())
    assert report.passed, report
    assert {"gradients", "second_order"} <= set(report.checks)
    # Before the screen: 2 forwards per element for first order and per element of (x, v)
    # for second order, over 1,800 in all. Independent count: the Function's own counter.
    assert fn.calls < 150, fn.calls


def test_one_element_just_beyond_tolerance_is_caught_and_located():
    x = _x()
    x[17] = 0.1  # exact mode's tolerance there: 1e-5 + 1e-3 * |2 x v| <= 3.2e-4
    report = gradsmith.check(_counting({17: 2e-3}), x, checks=["gradients"])
    (finding,) = report.errors
    assert finding.code == "gradient-mismatch"
    assert [e[0] for e in finding.details["elements"]] == [17]
    analytic, numerical = finding.details["elements"][0][1:]
    # Hand computation: the planted offset, times the random grad_output that was projected.
    assert analytic - numerical == pytest.approx(2e-3 * analytic / (2 * 0.1 + 2e-3), rel=1e-4)


def test_errors_that_cancel_along_a_sign_direction_are_caught():
    # +d at one element and -d at another cancel on every +-1 direction giving both the same
    # sign; the screen's magnitudes in [0.5, 1.5] never cancel them, and exact mode locates both.
    x = _x()
    x[40] = x[41] = 0.5
    report = gradsmith.check(_counting({40: 0.05, 41: -0.05}), x, checks=["gradients"])
    (finding,) = report.errors
    assert sorted(e[0] for e in finding.details["elements"]) == [40, 41]


def test_silently_missing_double_backward_is_still_caught():
    report = gradsmith.check(_counting(detach=True), _x())
    assert not report.errors, report
    assert report.codes("warning") == {"double-backward-unsupported"}, report


def test_host_random_states_of_the_caller_are_left_as_they_were():
    class NoisyScale(Function):
        @staticmethod
        def forward(ctx, x):
            k = 1.0 + random.random() + float(np.random.rand())
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k

    random.seed(5)
    np.random.seed(5)
    want = (random.random(), float(np.random.rand()))
    random.seed(5)
    np.random.seed(5)
    report = gradsmith.check(NoisyScale, _x(12))
    assert report.passed, report
    assert (random.random(), float(np.random.rand())) == want
