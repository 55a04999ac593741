"""A Function whose ``apply`` converts its inputs before autograd sees them (real to complex,
as phytorch's ``CargsMixin``) returns gradients of the converted dtype: autograd fits them to
the tensors the Function received, and the conversion's backward takes the real part. That is
no dtype error; a wrong gradient is still found, and a complex gradient handed straight to a
real input still is an error.

Reference: autograd of ``torch.exp`` on the same real inputs."""

import torch

import gradsmith


class Exp(torch.autograd.Function):
    """exp of a complex tensor, real inputs made complex first (holomorphic convention)."""

    @staticmethod
    def forward(ctx, z):
        out = torch.exp(z)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out.conj()

    @classmethod
    def apply(cls, z):
        return super().apply(z.to(torch.complex128))


class WrongExp(Exp):
    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return 2 * g * out.conj()


class ComplexGradForReal(torch.autograd.Function):
    """Receives the real tensor itself and returns a complex gradient: autograd drops its
    imaginary part."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (g * 2).to(torch.complex128) + 1j


def _x():
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_reference_gradient_of_the_converted_function():
    x = _x().requires_grad_()
    y = Exp.apply(x)
    g = torch.randn(3, 4, dtype=torch.complex128)
    (got,) = torch.autograd.grad(y, x, g)
    leaf = _x().requires_grad_()
    (want,) = torch.autograd.grad(torch.exp(leaf.to(torch.complex128)), leaf, g)
    torch.testing.assert_close(got, want)


def test_converted_inputs_are_no_dtype_error():
    report = gradsmith.check(Exp, _x().requires_grad_())
    assert report.passed, report.findings
    assert not any(f.code == "grad-dtype-mismatch" for f in report.findings)


def test_wrong_backward_behind_a_conversion_still_fails():
    report = gradsmith.check(WrongExp, _x().requires_grad_())
    assert any(f.code == "gradient-mismatch" and f.is_error for f in report.findings)


def test_complex_gradient_handed_to_a_real_input_still_is_an_error():
    report = gradsmith.check(ComplexGradForReal, _x().requires_grad_())
    assert any(f.code == "grad-dtype-mismatch" and f.is_error for f in report.findings)
