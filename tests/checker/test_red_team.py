"""Red team for trust (issues 18 and 22): rules that turn an error into a warning, an info or a
fitted declaration must never let a real wrong gradient end in a PASS. Each planted bug here is
a reduced Function written for this file, its wrongness shown against autograd of an equivalent
expression; each has a correct twin that must still PASS.
"""

import importlib.util
import sys

import pytest
import torch
from torch.autograd import Function

import gradsmith


def _function(forward, backward):
    """A Function with ``forward(*xs)`` and ``backward(g, *xs)`` (inputs saved)."""

    class Planted(Function):
        @staticmethod
        def forward(ctx, *xs):
            ctx.save_for_backward(*xs)
            return forward(*xs)

        @staticmethod
        def backward(ctx, g):
            return backward(g, *ctx.saved_tensors)

    return Planted


def _inputs(*xs):
    return [x.clone().requires_grad_() for x in xs]


def _wrong_by_hand(fn, reference, xs):
    """backward's gradients differ from autograd of the equivalent expression somewhere."""
    leaves = _inputs(*xs)
    got = torch.autograd.grad(fn.apply(*leaves).sum(), leaves)
    leaves = _inputs(*xs)
    want = torch.autograd.grad(reference(*leaves).sum(), leaves)
    return any(not torch.allclose(a, b, rtol=1e-4, atol=0) for a, b in zip(got, want))


# -- approximating forward (bb58cb8): a mismatch within 1% that integrates away ----------------
_softplus = torch.nn.functional.softplus
_LINE = torch.linspace(0.1, 1.9, 12, dtype=torch.float64).reshape(3, 4)
_AROUND_3 = torch.linspace(2.0, 4.0, 12, dtype=torch.float64).reshape(3, 4)
_POINT = float(_LINE[1, 2])


def _narrow(x, lo, hi, factor):
    return torch.where((x > lo) & (x < hi), factor, 1.0).to(x.dtype)


APPROXIMATING_BUGS = {
    # grad * 1.005 on 2.9 < x < 3.1 only: the derivative of a function with kinks within 1e-3
    # of forward, which the line integral alone took for an approximating forward
    "narrow-region": (lambda x: _softplus(x),
                      lambda g, x: g * torch.sigmoid(x) * _narrow(x, 2.9, 3.1, 1.005),
                      [_AROUND_3]),
    # a factor wrong at one value only (a special case gone wrong): integrates to nothing
    "single-point": (lambda x: x ** 3,
                     lambda g, x: g * 3 * x * x * torch.where(
                         (x - _POINT).abs() < 1e-9, 1.008, 1.0).to(x.dtype),
                     [_LINE]),
    # the second input is right, the first wrong on a narrow band
    "one-of-two-inputs": (lambda x, y: _softplus(x) * y,
                          lambda g, x, y: (g * torch.sigmoid(x) * y * _narrow(x, 0.9, 1.1, 1.008),
                                           g * _softplus(x)),
                          [_LINE, torch.linspace(0.5, 1.5, 12, dtype=torch.float64).reshape(3, 4)]),
    # the narrow band beside a small jump of forward's elsewhere on the line, whose own
    # roughness made the mismatch's largest difference large
    "beside-a-forward-jump": (lambda x: _softplus(x) + 1e-3 * (x > 1.55).to(x.dtype),
                              lambda g, x: g * torch.sigmoid(x) * _narrow(x, 0.9, 1.1, 1.008),
                              [_LINE]),
}

APPROXIMATING_TWINS = {
    "narrow-region": (lambda x: _softplus(x), lambda g, x: g * torch.sigmoid(x), [_AROUND_3]),
    "single-point": (lambda x: x ** 3, lambda g, x: g * 3 * x * x, [_LINE]),
    "one-of-two-inputs": (lambda x, y: _softplus(x) * y,
                          lambda g, x, y: (g * torch.sigmoid(x) * y, g * _softplus(x)),
                          [_LINE, torch.linspace(0.5, 1.5, 12, dtype=torch.float64).reshape(3, 4)]),
    "beside-a-forward-jump": (lambda x: _softplus(x) + 1e-3 * (x > 1.55).to(x.dtype),
                              lambda g, x: g * torch.sigmoid(x), [_LINE]),
}


@pytest.mark.parametrize("name", sorted(APPROXIMATING_BUGS))
def test_a_bug_that_integrates_away_is_not_an_approximating_forward(name):
    forward, backward, xs = APPROXIMATING_BUGS[name]
    fn = _function(forward, backward)
    assert _wrong_by_hand(fn, forward, xs)
    report = gradsmith.check(fn, *_inputs(*xs), checks=["gradients"])
    assert not report.passed, report
    assert "gradient-mismatch" in report.codes("error")
    assert not any(f.details.get("approximating_forward") for f in report.findings)


@pytest.mark.parametrize("name", sorted(APPROXIMATING_TWINS))
def test_the_correct_twins_of_the_approximating_probes_pass(name):
    forward, backward, xs = APPROXIMATING_TWINS[name]
    fn = _function(forward, backward)
    assert not _wrong_by_hand(fn, forward, xs)
    report = gradsmith.check(fn, *_inputs(*xs), checks=["gradients"])
    assert report.passed, report
    assert "gradient-mismatch" not in report.codes()


def test_an_approximating_forward_around_a_smooth_exact_derivative_is_still_a_warning():
    """The rule's own case survives the attribution: forward wiggles (5e-4 sin 5x) around
    softplus, backward is softplus' exact derivative."""
    fn = _function(lambda x: _softplus(x) + 5e-4 * torch.sin(5 * x),
                   lambda g, x: g * torch.sigmoid(x))
    report = gradsmith.check(fn, *_inputs(_LINE), checks=["gradients"])
    assert report.passed
    (finding,) = [f for f in report.findings if f.code == "gradient-mismatch"]
    assert finding.severity == "warning" and finding.details["approximating_forward"]


# -- quantized derivative (77026e6): a derivative rounded to a grid ----------------------------
STORED_4_BITS = '''
import torch
import gradsmith
from torch.autograd import Function
{line}
class Stored4(Function):
    # x * sigmoid(x - 1), its derivative (times {factor}) rounded to a 4-bit grid
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x - 1)
        deriv = (s + x * s * (1 - s)) * {factor}
        ctx.save_for_backward(((deriv + 0.05) * (15 / 1.25)).round().clamp(0, 15))
        return x * s

    @staticmethod
    def backward(ctx, g):
        (q,) = ctx.saved_tensors
        return g * (q * (1.25 / 15) - 0.05)
'''


def _stored(tmp_path, stem, factor, line=""):
    path = tmp_path / f"{stem}.py"
    path.write_text(STORED_4_BITS.format(line=line, factor=factor))
    spec = importlib.util.spec_from_file_location(f"red_team_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Stored4


def _swish_shifted(x):
    return x * torch.sigmoid(x - 1)


def test_a_wrong_factor_under_a_coarse_grid_is_no_low_precision_derivative(tmp_path):
    """A derivative 4% too large, rounded to 4 bits, stays within a step (1.25/15) of the
    true one: it was an undeclared estimator of kind quantized whose printed, "checked"
    approximate=True line PASSed pasted. Rounding's error does not grow with the derivative;
    this one does (0.5 step across the range)."""
    fn = _stored(tmp_path, "factor", "1.04")
    x = torch.linspace(-4, 4, 101, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(fn.apply(x).sum(), x)
    (want,) = torch.autograd.grad(_swish_shifted(x).sum(), x)
    assert float((got - want).abs().max()) <= 1.25 / 15 * 1.05  # within a step ...
    large = want > 0.8
    assert float((got[large] - want[large]).mean()) > 0.02  # ... and biased upwards: a bug
    x0 = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    report = gradsmith.check(fn, x0.requires_grad_(), compat=False)
    assert "gradient-mismatch" in report.codes("error"), report
    assert "undeclared-estimator" not in report.codes(), report


def test_a_correct_derivative_rounded_to_4_bits_keeps_its_line(tmp_path):
    fn = _stored(tmp_path, "right", "1.0")
    x = torch.linspace(-4, 4, 101, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(fn.apply(x).sum(), x)
    (want,) = torch.autograd.grad(_swish_shifted(x).sum(), x)
    assert float((got - want).abs().max()) <= 1.25 / 15 / 2 + 1e-12  # rounded to nearest
    x0 = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    report = gradsmith.check(fn, x0.requires_grad_(), compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["estimator"] == {"x": "quantized"}
    line = finding.details["declaration"]
    assert finding.details["verified"] and "approximate=True" in line
    torch.manual_seed(0)
    assert gradsmith.check(_stored(tmp_path, "pasted", "1.0", line), compat=False).passed


# -- intended= fits (e661152): a constant backward is an added loss only for an ignored input --
STE = '''
import torch
import gradsmith
from torch.autograd import Function
{line}
class Rounded(Function):
    # round(x * k) / k, straight-through: backward should pass the incoming gradient
    @staticmethod
    def forward(ctx, x, k):
        return torch.round(x * k) / k

    @staticmethod
    def backward(ctx, g):
        return {returned}, None
'''


def _rounded(tmp_path, stem, returned, line=""):
    path = tmp_path / f"{stem}.py"
    path.write_text(STE.format(line=line, returned=returned))
    spec = importlib.util.spec_from_file_location(f"red_team_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Rounded


_X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


@pytest.mark.parametrize("returned", ["torch.ones_like(g)", "torch.full_like(g, 2.0)"],
                         ids=["ones", "twos"])
def test_a_straight_through_backward_that_forgets_the_incoming_gradient_gets_no_checked_line(
        tmp_path, returned):
    """``torch.ones_like(g)`` for ``g``: the gradient of no loss of the output. It was fitted
    as an added loss (``intended=lambda x, k, grad: torch.ones_like(x)``, or ``(2 * k) *``
    with k = 1), printed as checked, and PASSed pasted; an added loss is an input forward
    ignores, and round(x) does not ignore x."""
    fn = _rounded(tmp_path, "forgot", returned)
    x = _X.clone().requires_grad_()
    g = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (got,) = torch.autograd.grad(fn.apply(x, 1), x, g)
    # straight-through's reference: the gradient of the identity, which backward is not
    assert not torch.allclose(got, g)
    report = gradsmith.check(fn, _X.clone().requires_grad_(), 1, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert not finding.details["verified"], finding.details["declaration"]
    assert "ones_like" not in finding.details["declaration"]


def test_the_straight_through_twin_passing_the_gradient_gets_a_line_that_passes(tmp_path):
    fn = _rounded(tmp_path, "right", "g")
    x = _X.clone().requires_grad_()
    (got,) = torch.autograd.grad(fn.apply(x, 1).sum(), x)
    torch.testing.assert_close(got, torch.ones_like(x))  # the identity's gradient
    report = gradsmith.check(fn, _X.clone().requires_grad_(), 1, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"], line
    torch.manual_seed(0)
    assert gradsmith.check(_rounded(tmp_path, "pasted", "g", line), compat=False).passed


# -- float32 checks (issue 18/22): a wrong factor within float32's element-wise rtol (1.2 %) ---
def _f32(fn):
    """forward computes in float32 whatever it is handed (as Triton kernels do)."""
    return lambda *xs: fn(*(x.float() for x in xs)).to(xs[0].dtype)


_F32_X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
_F32_W = torch.randn(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
_ARANGE = torch.arange(1.0, 5.0, dtype=torch.float64)


def _softmax_backward(g, x, factor=1.0):
    p = torch.softmax(x, -1)
    gw = g * _ARANGE.to(x.dtype)
    return factor * p * (gw - (gw * p).sum(-1, keepdim=True))


def _tanh_mm_backward(g, x, w, factor=1.0):
    gy = (1 - torch.tanh(x @ w) ** 2) * g
    return gy @ w.T, factor * x.T @ gy


def _layer_norm_backward(g, x):
    sigma = (x.var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    xhat = (x - x.mean(-1, keepdim=True)) / sigma
    return (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) / sigma


_EXP_SUM = _f32(lambda x: torch.exp(x).sum(-1))
_SOFTMAX = _f32(lambda x: torch.softmax(x, -1) * _ARANGE.float())
_TANH_MM = _f32(lambda x, w: torch.tanh(x @ w))

# name -> (forward, backward, inputs, the input whose gradient is off, by how much)
FLOAT32_BUGS = {
    "exp-sum-1%": (_EXP_SUM, lambda g, x: torch.exp(x) * g[:, None] * 1.01, [_F32_X], 0, 0.01),
    "exp-sum-0.3%": (_EXP_SUM, lambda g, x: torch.exp(x) * g[:, None] * 1.003, [_F32_X], 0,
                     0.003),
    "softmax-0.5%": (_SOFTMAX, lambda g, x: _softmax_backward(g, x, 0.995), [_F32_X], 0, 0.005),
    "matmul-w-1%": (_TANH_MM, lambda g, x, w: _tanh_mm_backward(g, x, w, 1.01),
                    [_F32_X, _F32_W], 1, 0.01),
}

FLOAT32_TWINS = {
    "exp-sum": (_EXP_SUM, lambda g, x: torch.exp(x) * g[:, None], [_F32_X]),
    "softmax": (_SOFTMAX, _softmax_backward, [_F32_X]),
    "matmul": (_TANH_MM, _tanh_mm_backward, [_F32_X, _F32_W]),
    # kinks within the step (relu), and a forward whose float32 rounding is far above |f|
    "relu-square": (_f32(lambda x: torch.relu(x) ** 2), lambda g, x: 2 * torch.relu(x) * g,
                    [_F32_X]),
    "cancelling": (_f32(lambda x: (x * x + 1e3) - 1e3), lambda g, x: 2 * x * g, [_F32_X]),
    # elements 1e-4 and 3e-4 from a ReLU's kink: every step crosses it, and the central
    # differences are off by half the slope's jump at every step, as steady as a wrong factor
    "relu-at-a-kink": (_f32(lambda x: 3 * torch.relu(x)), lambda g, x: 3 * (x > 0).to(x.dtype) * g,
                       [torch.cat([torch.tensor([1e-4, -3e-4], dtype=torch.float64),
                                   _F32_X.reshape(-1)[2:]])]),
    "layer-norm": (_f32(lambda x: torch.nn.functional.layer_norm(x, (4,))),
                   lambda g, x: _layer_norm_backward(g, x), [_F32_X]),
}


def _against_autograd(forward, backward, xs):
    """Per input, backward's gradient and autograd's of forward (float32 inside)."""
    leaves = _inputs(*xs)
    got = torch.autograd.grad(_function(forward, backward).apply(*leaves).sum(), leaves)
    leaves = _inputs(*xs)
    want = torch.autograd.grad(forward(*leaves).sum(), leaves)
    return got, want


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(FLOAT32_BUGS))
def test_a_wrong_factor_within_float32s_tolerance_fails(name, dtype):
    forward, backward, xs, wrong, factor = FLOAT32_BUGS[name]
    xs = [x.to(dtype) for x in xs]
    got, want = _against_autograd(forward, backward, xs)
    for t, (a, b) in enumerate(zip(got, want)):  # off by the planted factor, by hand
        off = float((a * b).sum() / (b * b).sum()) - 1
        assert abs(off) == pytest.approx(factor if t == wrong else 0.0, abs=1e-4)
    report = gradsmith.check(_function(forward, backward), *_inputs(*xs), compat=False,
                             checks=["gradients"])
    bad = [f for f in report.findings if f.is_error]
    assert [(f.code, f.details.get("mode")) for f in bad] == [("gradient-mismatch", "systematic")]
    assert bad[0].input == f"args[{wrong}]"
    assert abs(bad[0].details["ratio"] - 1) == pytest.approx(factor, rel=0.2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(FLOAT32_TWINS))
def test_correct_float32_twins_pass(name, dtype):
    forward, backward, xs = FLOAT32_TWINS[name]
    xs = [x.to(dtype) for x in xs]
    for a, b in zip(*_against_autograd(forward, backward, xs)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    report = gradsmith.check(_function(forward, backward), *_inputs(*xs), compat=False,
                             checks=["gradients"])
    assert report.passed, report
    assert any(f.code == "low-precision-numerics" for f in report.findings) or \
        dtype == torch.float32  # the check really was float32-calibrated
