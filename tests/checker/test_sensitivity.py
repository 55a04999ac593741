"""Large inputs: the probe strategy catches what gradcheck's fast mode misses, at 10,000
elements, without false alarms on correct Functions."""

import pytest
import torch
from square_functions import Square, SquareOnePercent, square_one_element
from torch.autograd import Function, gradcheck

import gradsmith

N = 10_000
BAD_ELEMENT = 1234
SquareOneElement = square_one_element(BAD_ELEMENT)


class MatmulTransposedB(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b.t(), g.t() @ a  # second one transposed


class ReLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


def _x(n=N, dtype=torch.float64, seed=0):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("fn", [SquareOnePercent, SquareOneElement])
def test_gradcheck_fast_mode_misses_these(fn):
    x = _x().requires_grad_(True)
    assert gradcheck(fn.apply, (x,), fast_mode=True, raise_exception=False)


def test_one_percent_everywhere_is_caught():
    report = gradsmith.check(SquareOnePercent, _x(), checks=["gradients"])
    assert not report.passed
    (finding,) = report.errors
    assert finding.code == "gradient-mismatch"
    assert finding.details["probe"]["ratio"] == pytest.approx(1.01, rel=1e-6)


def test_single_element_twice_off_is_caught_and_located():
    report = gradsmith.check(SquareOneElement, _x(), checks=["gradients"])
    (finding,) = report.errors
    assert finding.code == "gradient-mismatch"
    assert [e[0] for e in finding.details["elements"]] == [BAD_ELEMENT]
    index, analytic, numerical = finding.details["elements"][0]
    assert analytic == pytest.approx(2 * numerical, rel=1e-6)
    assert "x[1234]" in finding.message


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_correct_function_passes_at_scale(dtype):
    report = gradsmith.check(Square, _x(dtype=dtype))
    assert report.passed, str(report)


def test_transposed_weight_gradient_is_caught_in_probe_mode():
    a = _x(100 * 100).reshape(100, 100)
    b = _x(100 * 100, seed=1).reshape(100, 100)
    report = gradsmith.check(MatmulTransposedB, a, b, checks=["gradients"])
    assert {f.input for f in report.errors} == {"b"}
    ok = gradsmith.check(MatmulTransposedB, a, b, checks=["gradients"], exact_max=0)
    assert not ok.passed  # probe mode for every input gives the same verdict


def test_many_kinks_at_scale_are_not_a_failure():
    x = _x()
    x[::100] = 0.0  # 100 elements exactly on ReLU's kink
    report = gradsmith.check(ReLU, x, checks=["gradients"])
    assert report.passed, str(report)


def test_jacobian_block_is_cropped_for_heatmaps():
    report = gradsmith.check(SquareOneElement, _x(), checks=["gradients"])
    analytic, numerical = report.jacobians["x"]
    assert analytic.shape == numerical.shape
    assert max(analytic.shape) <= 256
    assert (analytic - numerical).abs().max() > 0
    start = report.errors[0].details["jacobian_block"]
    row, col = divmod(int((analytic - numerical).abs().argmax()), analytic.shape[1])
    assert (start["row_start"] + row, start["col_start"] + col) == (BAD_ELEMENT, BAD_ELEMENT)
