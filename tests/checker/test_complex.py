"""Complex inputs and outputs are verified with Wirtinger derivatives, the convention
gradcheck uses: verdicts agree with gradcheck/gradgradcheck on every complex corpus Function,
and a backward that forgets .conj() fails with a message in complex terms."""

import pytest
import torch
from corpus import complex_fns
from torch.autograd import Function

import gradsmith

CASES = complex_fns.CASES


def _reference(case, second_order):
    """gradcheck / gradgradcheck in double precision (complex64 inputs upcast, as gradsmith
    verifies the math on complex128 copies: gradcheck's step is meaningless in complex64)."""
    args = [(a.to(torch.complex128) if a.is_complex() else a).clone().requires_grad_()
            for a in case.make_args()]
    check = torch.autograd.gradgradcheck if second_order else torch.autograd.gradcheck
    try:
        return check(case.fn.apply, args)
    except RuntimeError:  # GradcheckError
        return False


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verdict_agrees_with_gradcheck(case):
    report = gradsmith.check(case.fn, *case.make_args())
    first = _reference(case, second_order=False)
    second = first and _reference(case, second_order=True)
    assert report.passed == case.passes, str(report)
    assert "check-crashed" not in report.codes(), str(report)
    if first and not second:  # gradgradcheck fails: the second derivative missing (0) ...
        assert report.codes("warning") & {"double-backward-unsupported"}, str(report)
        assert report.passed and not report.errors, str(report)
    else:  # ... or gradsmith agrees with gradcheck and gradgradcheck
        assert report.passed == second, str(report)


def test_forgotten_conj_is_named_in_complex_terms():
    z, a = complex_fns._c(5), complex_fns._c(5, seed=1)
    report = gradsmith.check(complex_fns.ComplexMulNoConj, z, a)
    f = next(f for f in report.errors if f.input == "z")
    assert "z[0].real" in f.message and "z[0].imag" in f.message
    assert ".conj()" in f.hint and "Wirtinger" in f.hint
    # The reported numbers are PyTorch's convention: numerical = autograd of z * a.
    z2 = z.clone().requires_grad_()
    (want,) = torch.autograd.grad(z2 * a, z2, torch.ones(5, dtype=torch.complex128))
    torch.testing.assert_close(want, a.conj())


def test_complex_inputs_must_be_present_to_be_checked():
    class Real(Function):
        @staticmethod
        def forward(ctx, z):
            return z.real * 2

        @staticmethod
        def backward(ctx, g):
            return (2 * g).to(torch.complex128)

    # A real output of a complex input: the gradient of the real part only.
    report = gradsmith.check(Real, complex_fns._c(4))
    assert report.passed, str(report)


class ComplexScaleVmap(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(z, a):
        return z * a

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, g):
        z, a = ctx.saved_tensors
        gz = g * a.conj() if ctx.needs_input_grad[0] else None
        ga = g * z.conj() if ctx.needs_input_grad[1] else None
        return gz, ga

    @staticmethod
    def jvp(ctx, tz, ta):
        z, a = ctx.saved_tensors
        return tz * a + z * ta


def test_vmap_and_forward_mode_run_on_complex():
    report = gradsmith.check(ComplexScaleVmap, complex_fns._c(3, 2), complex_fns._c(3, 2, seed=1))
    assert report.passed, str(report)
    assert {"vmap", "forward_ad", "second_order", "robustness"} <= set(report.checks)
