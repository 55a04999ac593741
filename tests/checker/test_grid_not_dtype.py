"""A forward whose outputs sit on one fixed dyadic grid (a fine quantizer) is not a kernel that
computes in half precision, and half precision's calibration still lets a wrong gradient fail.

Before this change a 1,024-level quantizer over [-2, 2] was taken for float16 numerics (every output
is a float16 value), the check was calibrated to atol 10 and rtol 100, and a backward off by a
factor of 3 PASSed. References: autograd of the plain expression, and torch's own half-precision
rounding for the kernel-shaped Functions.
"""

import torch

import gradsmith


def _grid(x):
    return torch.round(x * 1024) / 1024


class FineQuantizerTripled(torch.autograd.Function):
    """A 1,024-level rounding with a straight-through backward three times too large."""

    @staticmethod
    def forward(ctx, x):
        return _grid(x)

    @staticmethod
    def backward(ctx, g):
        return 3 * g


class HalfTanh(torch.autograd.Function):
    """A kernel that computes in float16 whatever it is handed, with its right gradient."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x.half())
        ctx.save_for_backward(y)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y.to(g.dtype) ** 2)


class HalfTanhDoubled(HalfTanh):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 2 * g * (1 - y.to(g.dtype) ** 2)


class HalfOutputsDoubled(torch.autograd.Function):
    """Outputs float16 for any input; backward twice the derivative of x * x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).half()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (4 * x * g.to(x.dtype))


def _x(seed=0):
    return torch.rand(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * 4 - 2


def test_fine_grid_is_not_taken_for_half_precision_and_a_wrong_gradient_fails():
    x = _x()
    assert torch.equal(_grid(x).half().double(), _grid(x))  # every output is a float16 value
    report = gradsmith.check(FineQuantizerTripled, x)
    assert not report.passed, report
    assert not [f for f in report.findings if f.details.get("computes_in") == "float16"]


def test_half_precision_kernel_is_still_detected_and_its_right_gradient_passes():
    x = _x(1)
    xl = x.clone().requires_grad_(True)
    HalfTanh.apply(xl).sum().backward()
    torch.testing.assert_close(xl.grad, 1 - torch.tanh(x) ** 2, atol=5e-3, rtol=5e-3)
    report = gradsmith.check(HalfTanh, x)
    assert report.passed, report
    found = [f for f in report.findings if f.code == "low-precision-numerics"]
    assert found and found[0].details["computes_in"] == "float16"


def test_half_precision_calibration_still_fails_a_doubled_gradient():
    for fn in (HalfTanhDoubled, HalfOutputsDoubled):
        report = gradsmith.check(fn, _x(2))
        assert "gradient-mismatch" in report.codes("error"), (fn.__name__, report)
