"""Functions shaped like fused kernels, in plain PyTorch (no Triton needed): they compute in
float32 whatever dtype they are handed, and their backward scales what it saved in place.

gradsmith must judge them on what they compute (their own precision, one backward per graph),
not report its own finite-difference noise or a second backward's leftovers as their bugs.
"""

import pytest
import torch
from torch.autograd.function import once_differentiable

import gradsmith


def _softmax_ce(z, t):
    """Loss and its logits gradient, in float32 like a kernel, returned in z's dtype."""
    z32 = z.float()
    loss = torch.nn.functional.cross_entropy(z32, t)
    grad = (torch.softmax(z32, -1) - torch.nn.functional.one_hot(t, z.shape[-1])) / z.shape[0]
    return loss.to(z.dtype), grad.to(z.dtype)


class FusedCE(torch.autograd.Function):
    """Writes the gradient in forward; backward scales the saved buffer in place (memory)."""

    @staticmethod
    def forward(ctx, z, t):
        loss, grad = _softmax_ce(z, t)
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad.mul_(g), None


class FusedCEForgetsScale(FusedCE):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad, None  # grad_output ignored: wrong unless the loss is the last op


class Float32Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x.float())
        ctx.save_for_backward(y)
        return y.to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (g.float() * (1 - y * y)).to(g.dtype)


class Float64Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


def _ce_args():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(4, 6, dtype=torch.float64, generator=gen), torch.tensor([0, 5, 2, 2])


def test_backward_scaling_its_saved_gradient_in_place_passes():
    # The gradient itself agrees with autograd of the plain expression (independent check).
    z, t = _ce_args()
    zl = z.clone().requires_grad_(True)
    FusedCE.apply(zl, t).mul(3.0).backward()
    zr = z.clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(zr, t).mul(3.0).backward()
    torch.testing.assert_close(zl.grad, zr.grad, atol=1e-6, rtol=1e-5)

    report = gradsmith.check(FusedCE, z, t)
    assert report.passed, report
    assert "backward-error" not in report.codes()
    mutated = [f for f in report.findings if f.code == "saved-tensor-mutated"]
    assert [f.severity for f in mutated] == ["warning"]  # retain_graph is the only casualty
    assert "retain_graph" in mutated[0].message


def test_backward_ignoring_grad_output_fails_on_its_own_precision():
    report = gradsmith.check(FusedCEForgetsScale, *_ce_args())
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")


def test_float32_computation_behind_float64_outputs_is_detected_and_passes():
    x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    report = gradsmith.check(Float32Tanh, x)
    assert report.passed, report
    found = [f for f in report.findings if f.code == "low-precision-numerics"]
    assert found and found[0].details["computes_in"] == "float32"
    assert "undeclared-estimator" not in report.codes()


@pytest.mark.parametrize("fn", [Float64Tanh], ids=["float64"])
def test_float64_computation_keeps_float64_numerics(fn):
    x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    report = gradsmith.check(fn, x)
    assert report.passed, report
    assert "low-precision-numerics" not in report.codes()


def test_saved_tensor_written_by_a_twice_differentiable_backward_stays_an_error():
    class Scales(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(2 * x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (two_x,) = ctx.saved_tensors
            return two_x.mul_(g)

    x = torch.randn(3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    report = gradsmith.check(Scales, x)
    mutated = [f for f in report.findings if f.code == "saved-tensor-mutated"]
    assert mutated and mutated[0].severity == "error"


# -- reference= ---------------------------------------------------------------------------------
def _ce_reference(z, t):
    return torch.nn.functional.cross_entropy(z, t)


def test_reference_judges_outputs_and_gradients_without_a_tolerance_to_set():
    good = gradsmith.check(FusedCE, *_ce_args(), reference=_ce_reference)
    assert good.passed, good
    assert "reference" in good.checks and "gradients" in good.skipped
    bad = gradsmith.check(FusedCEForgetsScale, *_ce_args(), reference=_ce_reference)
    errors = [f for f in bad.findings if f.is_error]
    assert [(f.code, f.input) for f in errors] == [("reference-mismatch", "z")]
    # The tolerance comes from the reference's own float32 error, far below the bug's size.
    assert errors[0].details["computes_in"] == "float32"
    assert errors[0].details["tolerance"] < 1e-4


def test_reference_catches_a_wrong_forward():
    def off_by_a_bit(z, t):
        return _ce_reference(z, t) * (1 + 1e-4)

    report = gradsmith.check(FusedCE, *_ce_args(), reference=off_by_a_bit)
    assert ("reference-mismatch", None) in {(f.code, f.input) for f in report.findings}


def test_registered_example_reference_is_used_by_check():
    class Registered(FusedCEForgetsScale):
        pass

    gradsmith.example(_ce_args, reference=_ce_reference)(Registered)
    report = gradsmith.check(Registered)
    assert "reference-mismatch" in report.codes("error")


def test_reference_with_the_wrong_outputs_is_a_declaration_error():
    report = gradsmith.check(FusedCE, *_ce_args(), reference=lambda z, t: (z.sum(), z.mean()))
    assert "reference-error" in report.codes("error")


@pytest.mark.parametrize("kwargs, match", [
    ({"reference": 3.0}, "reference must be a plain-PyTorch callable"),
    ({"reference": _ce_reference, "surrogate": _ce_reference}, "do not combine"),
])
def test_bad_reference_argument_is_a_clear_error(kwargs, match):
    with pytest.raises(gradsmith.GradsmithError, match=match):
        gradsmith.check(FusedCE, *_ce_args(), **kwargs)
