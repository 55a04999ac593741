"""Gradient modifications that are the derivative of no function get an ``intended=`` line that
gradsmith ran against the Function and that passes when pasted exactly as printed: an added
loss (icefall's WithLoss), an injected gradient (threestudio's SpecifyGradient), an activation
balancer (ActivationBalancerFunction), a sign flip that keeps a parameter in range (LimitParamValue),
blackbox differentiation of a piecewise-constant solver (blackbox-backprop's TrueRanker,
ShortestPath), sinabs' periodic exponential surrogate (rockpool), guided backpropagation
(pytorch-grad-cam, MONAI), a bound's pass-through gradient (CompressAI's LowerBoundFunction,
image_compression's LowerBound/UpperBound), a gradient clipped in norm per row (bgflow's
_ClipGradient) and feedback alignment (decolle's
LinearFAFunction); a derivative stored in 8 bits (icefall's DoubleSwish) is an approximate
gradient with an approximate=True line. Reduced cases written here.
Each printed line is compared with a hand computation on fresh inputs, passes pasted above the
class, and a planted bug in the same family still FAILs under it."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

HEADER = """\
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith

"""

ADDED_LOSS = """
class AddedLoss(Function):
    @staticmethod
    def forward(ctx, x, penalty):
        ctx.shape = penalty.shape
        return x

    @staticmethod
    def backward(ctx, g):
        return g, torch.ones(ctx.shape, dtype=g.dtype) * {k}
"""

KEEP_IN_RANGE = """
class KeepInRange(Function):
    @staticmethod
    def forward(ctx, x, low: float, high: float):
        ctx.save_for_backward(x)
        ctx.low, ctx.high = low, high
        return x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        g = g * torch.where((g > 0) & (x < ctx.low {k}), -1.0, 1.0)
        g = g * torch.where((g < 0) & (x > ctx.high), -1.0, 1.0)
        return g, None, None
"""

SORT_POSITION = """
class SortPosition(Function):
    @staticmethod
    def forward(ctx, scores, lam: float):
        ctx.save_for_backward(scores)
        ctx.lam = lam
        return scores.argsort(-1).argsort(-1).to(scores.dtype)

    @staticmethod
    def backward(ctx, g):
        (scores,) = ctx.saved_tensors
        ranks = scores.argsort(-1).argsort(-1).to(scores.dtype)
        moved = (scores + ctx.lam * g).argsort(-1).argsort(-1).to(scores.dtype)
        return -(ranks - moved) / (ctx.lam {k}), None
"""

GUIDED_RELU = """
class GuidedRelu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype) * (g > {k}).to(g.dtype)
"""


FEEDBACK_LINEAR = """
class FeedbackLinear(Function):
    @staticmethod
    def forward(ctx, x, weight, feedback):
        ctx.save_for_backward(x, weight, feedback)
        return x.mm(weight.t())

    @staticmethod
    def backward(ctx, g):
        x, weight, feedback = ctx.saved_tensors
        return g.mm(feedback) * {k}, g.t().mm(x), None
"""


BALANCER = """
class Balancer(Function):
    @staticmethod
    def forward(ctx, x, scale_factor, sign_factor):
        ctx.save_for_backward(x > 0, scale_factor, sign_factor)
        return x

    @staticmethod
    def backward(ctx, g):
        xgt0, scale_factor, sign_factor = ctx.saved_tensors
        factor = sign_factor + scale_factor * (xgt0.to(g.dtype) - {k})
        return g - g.abs() * factor, None, None
"""


def _balancer(x, scale_factor, sign_factor, g):
    pushed = torch.where(x > 0, sign_factor + scale_factor / 2, sign_factor - scale_factor / 2)
    return g - g.abs() * pushed, None, None


INJECT = """
class InjectGradient(Function):
    # a dummy loss whose backward hands x a gradient computed elsewhere (score distillation)
    @staticmethod
    def forward(ctx, x, given):
        ctx.save_for_backward(given)
        return torch.ones([1], dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        (given,) = ctx.saved_tensors
        return given * g * {k}, None
"""


def _inject(x, given, g):
    return given * g, None


MULTI_SPIKE = """
class MultiSpike(Function):
    @staticmethod
    def forward(ctx, data, threshold=1.0, window=0.5):
        ctx.save_for_backward(data.clone())
        ctx.threshold, ctx.window = threshold, window
        return ((data > 0) * torch.floor(data / threshold)).to(data.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (v,) = ctx.saved_tensors
        shifted = v - ctx.threshold / 2
        periodic = shifted % ctx.threshold
        new = periodic * (v >= ctx.threshold) + shifted * (v < ctx.threshold)
        pdf = torch.exp(-torch.abs(new - ctx.threshold / 2) / (ctx.window * {k}))
        return grad_output * pdf / ctx.threshold, None, None
"""


def _multi_spike(data, threshold, window, g):
    # by hand: the distance to the middle of the spike period the potential is in
    below = data < threshold
    middle = torch.where(below, torch.full_like(data, threshold), data - torch.remainder(
        data - threshold / 2, threshold) + threshold / 2)
    bump = torch.where(below, (data - threshold).abs(), (data - middle).abs())
    return g * torch.exp(-bump / window) / threshold, None, None


def _feedback_linear(x, weight, feedback, g):
    return g @ feedback, g.t() @ x, None


def _added_loss(x, penalty, g):
    return g, torch.ones_like(penalty)


def _keep_in_range(x, low, high, g):
    flip = ((g > 0) & (x < low)) | ((g < 0) & (x > high))
    return torch.where(flip, -g, g), None, None


def _sort_position(scores, lam, g):
    def ranks(s):
        return s.argsort(-1).argsort(-1).to(s.dtype)

    return (ranks(scores + lam * g) - ranks(scores)) / lam, None


def _guided(x, g):
    return torch.where((x > 0) & (g > 0), g, torch.zeros_like(g))


LOWER_BOUND = """
class LowerBound(Function):
    # max(x, bound) with Balle's pass-through gradient (image_compression's bound.py, reduced)
    @staticmethod
    def forward(ctx, inputs, bound):
        b = torch.ones_like(inputs) * bound
        ctx.save_for_backward(inputs, b)
        return torch.max(inputs, b)

    @staticmethod
    def backward(ctx, grad_output):
        inputs, b = ctx.saved_tensors
        keep = (inputs >= b) | (grad_output {k} 0)
        return keep.type(grad_output.dtype) * grad_output, None
"""

UPPER_BOUND = """
class UpperBound(Function):
    @staticmethod
    def forward(ctx, inputs, bound):
        b = torch.ones_like(inputs) * bound
        ctx.save_for_backward(inputs, b)
        return torch.min(inputs, b)

    @staticmethod
    def backward(ctx, grad_output):
        inputs, b = ctx.saved_tensors
        keep = (inputs <= b) | (grad_output {k} 0)
        return keep.type(grad_output.dtype) * grad_output, None
"""


def _lower_bound(x, bound, g):
    # by hand: zero where x is below the bound and a descent step (-g) would lower it further
    return torch.where((x < bound) & (g > 0), torch.zeros_like(g), g), None


def _upper_bound(x, bound, g):
    return torch.where((x > bound) & (g < 0), torch.zeros_like(g), g), None


CLIP_NORM = """
class ClipGradient(Function):
    # identity forward, each row's gradient clipped to norm max_norm (bgflow's, reduced)
    @staticmethod
    def forward(ctx, x, max_norm):
        ctx.max_norm = max_norm
        return x

    @staticmethod
    def backward(ctx, g):
        norm = torch.norm(g, p=2, dim=1)
        coeff = ctx.max_norm / torch.max(norm, ctx.max_norm * torch.ones_like(norm))
        return g * coeff.view(-1, 1) {k}, None
"""


def _clip_norm(x, max_norm, g):
    # by hand: rows longer than max_norm scaled down to it, the others unchanged
    rows = [r * min(1.0, max_norm / float(torch.sqrt((r * r).sum()))) for r in g]
    return torch.stack(rows), None


# name: (source, right, wrong (a planted bug in the same family), hand-computed reference)
CASES = {
    "AddedLoss": (ADDED_LOSS, "1", "2", _added_loss),
    "KeepInRange": (KEEP_IN_RANGE, "", "+ 1", _keep_in_range),
    "SortPosition": (SORT_POSITION, "", "* 2", _sort_position),
    "GuidedRelu": (GUIDED_RELU, "0", "-0.5", _guided),
    "FeedbackLinear": (FEEDBACK_LINEAR, "1", "2", _feedback_linear),
    "Balancer": (BALANCER, "0.5", "0.4", _balancer),
    "InjectGradient": (INJECT, "1", "0.5", _inject),
    "MultiSpike": (MULTI_SPIKE, "1", "2", _multi_spike),
    "LowerBound": (LOWER_BOUND, "<", ">", _lower_bound),
    "UpperBound": (UPPER_BOUND, ">", "<", _upper_bound),
    "ClipGradient": (CLIP_NORM, "", "* 0.9", _clip_norm),
}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"intended_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", list(CASES))
def test_the_printed_intended_line_is_true_passes_as_printed_and_a_bug_still_fails(
        tmp_path, name):
    source, right, wrong, by_hand = CASES[name]
    fn = getattr(_load(tmp_path, "plain", HEADER + source.format(k=right)), name)
    found = synthesize(fn)
    report = gradsmith.check(fn, *found.args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "intended=" in line and "..." not in line, line
    assert f"`{line}`" in finding.hint

    # The independent reference: what the printed intended= returns is the hand computation,
    # on fresh inputs (plain PyTorch, no gradsmith).
    module = _load(tmp_path, "names", HEADER + source.format(k=right))
    intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                    {"torch": torch, name: getattr(module, name)})
    torch.manual_seed(1)
    args = eval(line[len("@gradsmith.example("):].split(", intended=")[0],  # noqa: S307
                {"torch": torch})()
    g = torch.randn_like(getattr(module, name).apply(*args))
    got = intended(*args, g)
    want = by_hand(*args, g)
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if b is None:
            assert a is None
        else:
            torch.testing.assert_close(a.to(b.dtype), b)

    # Pasted exactly as printed, above the class: it passes on the line's own fresh inputs ...
    torch.manual_seed(0)
    pasted = getattr(_load(tmp_path, "pasted", HEADER + line + source.format(k=right)), name)
    again = gradsmith.check(pasted, compat=False)
    assert again.passed, f"{line}\n{again}"
    # ... and a backward with a planted bug in the same family FAILs under the same line.
    torch.manual_seed(0)
    other = getattr(_load(tmp_path, "other", HEADER + line + source.format(k=wrong)), name)
    assert "intended-mismatch" in gradsmith.check(other, compat=False).codes("error")



QUANTIZED = """
class StoredSwish(Function):
    # x * sigmoid(x - 1) with its derivative stored in 8 bits (icefall's DoubleSwish, reduced)
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x - {shift})
        y = x * s
        deriv = y * (1 - s) + s
        lo, hi = -0.044, 1.2
        scaled = (deriv - lo) * (255.0 / (hi - lo)) + {dither}
        ctx.save_for_backward(scaled.to(torch.uint8))
        return x * torch.sigmoid(x - 1.0)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        lo, hi = -0.044, 1.2
        return g * (d * ((hi - lo) / 255.0) + lo)
"""


def _stored_swish(tmp_path, stem, line="", shift="1.0", dither="0.5"):
    text = HEADER + line + QUANTIZED.format(shift=shift, dither=dither)
    return _load(tmp_path, stem, text).StoredSwish


@pytest.mark.parametrize("dither", ["0.5", "torch.rand_like(deriv)"], ids=["rounded", "dithered"])
def test_a_derivative_stored_in_8_bits_is_a_low_precision_derivative_with_a_checked_line(
        tmp_path, dither):
    # The premise, against autograd of the same expression: backward is within one grid step
    # (1.244 / 255) of the derivative and not equal to it.
    fn = _stored_swish(tmp_path, "plain", dither=dither)
    x = torch.linspace(-4, 4, 101, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(fn.apply(x).sum(), x)
    (want,) = torch.autograd.grad((x * torch.sigmoid(x - 1)).sum(), x)
    gap = float((got - want).abs().max())
    assert 1e-4 < gap <= 1.244 / 255 * 1.01

    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    assert "gradient-mismatch" not in report.codes("error")  # said what it is, instead
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["estimator"] == {"x": "quantized"}
    assert "256 levels" in finding.message and "8 bits" in finding.message
    assert "low-precision derivative by design" in finding.message
    line = finding.details["declaration"]
    assert finding.details["verified"] and "approximate=True" in line and "..." not in line

    # Pasted as printed it passes: the dither drawn in forward follows the input's memory
    # layout, so non-contiguous inputs legitimately get other draws (no layout finding).
    torch.manual_seed(0)
    pasted = gradsmith.check(_stored_swish(tmp_path, "pasted", line), compat=False)
    assert pasted.passed, f"{line}\n{pasted}"
    # A planted bug (the derivative of x * sigmoid(x), not of x * sigmoid(x - 1)) is more
    # than one step off: a gradient-mismatch, not a low-precision derivative ...
    wrong = _stored_swish(tmp_path, "wrong", shift="0.0", dither=dither)
    codes = gradsmith.check(wrong, *synthesize(wrong).args, compat=False).codes("error")
    assert "gradient-mismatch" in codes and "undeclared-estimator" not in codes
    # ... and under the printed line it fails the gradient quality the line declares.
    torch.manual_seed(0)
    under = _stored_swish(tmp_path, "wrong_pasted", line, shift="0.0", dither=dither)
    assert "gradient-quality" in gradsmith.check(under, compat=False).codes("error")


WRONG_TENSOR = """
class TwoWeights(Function):
    @staticmethod
    def forward(ctx, x, w1, w2):
        ctx.save_for_backward(x, w1, w2)
        return x.mm(w1.t()) + x.mm(w2.t())

    @staticmethod
    def backward(ctx, g):
        x, w1, w2 = ctx.saved_tensors
        return g.mm(w2) + g.mm(w2), g.t().mm(x), g.t().mm(x)
"""


def test_a_backward_using_another_of_forwards_tensors_is_no_feedback_alignment(tmp_path):
    # Sensitivity: w2 for w1 is exactly the gradient of forward with w1 := w2, but forward
    # reads w2 itself: a wrong-tensor slip, which must stay a gradient-mismatch (no estimator
    # line to paste over it). Only an argument forward never reads is a stand-in.
    fn = _load(tmp_path, "two", HEADER + WRONG_TENSOR).TwoWeights
    codes = gradsmith.check(fn, *synthesize(fn).args, compat=False).codes("error")
    assert "gradient-mismatch" in codes and "undeclared-estimator" not in codes


ATAN_SLOPE = """
class ATanSlope(Function):
    @staticmethod
    def forward(ctx, inputs, alpha):
        ctx.save_for_backward(inputs, alpha)
        return inputs.gt(0.).to(inputs.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        inputs, alpha = ctx.saved_tensors
        shared = grad_output / (1 + (alpha * 3.141592653589793 / 2 * inputs).square())
        return alpha / 2 * shared, (inputs / 2 * shared).sum() * {k}
"""


def test_a_slope_argument_gets_its_gradient_from_the_inputs_surrogate_term(tmp_path):
    # BrainCog's atan: alpha (a tensor) gets the arctan surrogate's own alpha-gradient, which
    # the input's fitted term already carries; it had no term of its own, so the line was a
    # template.
    fn = _load(tmp_path, "plain", HEADER + ATAN_SLOPE.format(k=1)).ATanSlope
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "surrogate=" in line and "..." not in line, line
    # the independent reference: the surrogate's autograd gradients, by hand
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    x = torch.linspace(-2, 2, 9, dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    gx, ga = torch.autograd.grad(surrogate(x, alpha).sum(), (x, alpha))
    u = torch.pi / 2 * 0.7 * x.detach()
    torch.testing.assert_close(gx, 0.7 / 2 / (1 + u * u))
    torch.testing.assert_close(ga, (x.detach() / 2 / (1 + u * u)).sum())
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", HEADER + line + ATAN_SLOPE.format(k=1)).ATanSlope
    assert gradsmith.check(pasted, compat=False).passed
    # a wrong alpha-gradient under the same line fails
    torch.manual_seed(0)
    wrong = _load(tmp_path, "wrong", HEADER + line + ATAN_SLOPE.format(k=2)).ATanSlope
    assert "surrogate-mismatch" in gradsmith.check(wrong, compat=False).codes("error")


ROUND_TIMES = """
class RoundTimes(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(scale)
        return x.round()

    @staticmethod
    def backward(ctx, g):
        (scale,) = ctx.saved_tensors
        return g * scale, None
"""


def test_an_injected_gradient_is_only_offered_for_an_input_forward_never_reads(tmp_path):
    # Sensitivity: round(x) whose backward multiplies by another argument has the shape of an
    # injected gradient, but forward reads x: no checked intended= line to paste over it.
    fn = _load(tmp_path, "round", HEADER + ROUND_TIMES).RoundTimes
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    for f in report.errors:
        if f.code == "undeclared-estimator":
            assert "grad * scale" not in f.details["declaration"], f.details["declaration"]


PICKY = """
class PickyFeedback(Function):
    @staticmethod
    def forward(ctx, x, weight, feedback):
        if bool((weight.abs() > 10).any()):
            raise ValueError("weight out of range")
        ctx.save_for_backward(x, weight, feedback)
        return x.mm(weight.t())

    @staticmethod
    def backward(ctx, g):
        x, weight, feedback = ctx.saved_tensors
        return g.mm(feedback) * 3, g.t().mm(x), None
"""


def test_a_forward_that_raises_on_a_swapped_argument_keeps_its_gradient_mismatch(tmp_path):
    # The feedback-alignment probe runs forward with the stand-in in the weight's place; a
    # forward that rejects those values made the gradients check crash (INCOMPLETE, the
    # wrong backward unreported).
    fn = _load(tmp_path, "picky", HEADER + PICKY).PickyFeedback
    torch.manual_seed(0)
    x, w = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    report = gradsmith.check(fn, x, w, 100 * torch.randn(3, 4, dtype=torch.float64),
                             compat=False)
    assert "gradient-mismatch" in report.codes("error")
    assert "check-crashed" not in report.codes("warning")
