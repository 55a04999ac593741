"""Findings say what, where, expected vs got, and how to fix it."""

import torch
from corpus import bugs_gradients, bugs_state, bugs_structure, correct

import gradsmith


def _one(report, code):
    (finding,) = [f for f in report.findings if f.code == code]
    return finding


def test_wrong_grad_count_names_the_inputs():
    r = gradsmith.check(bugs_structure.ScaleMissingNone, torch.randn(3, dtype=torch.float64), 2.0)
    f = _one(r, "wrong-grad-count")
    assert "returned 1 value(s) but forward takes 2 input(s) (x, alpha)" in f.message
    assert "None" in f.hint and f.details == {"expected": 2, "got": 1}


def test_dtype_mismatch_names_both_dtypes():
    r = gradsmith.check(bugs_structure.HalfPrecisionGrad, torch.randn(3, dtype=torch.float64))
    f = _one(r, "grad-dtype-mismatch")
    assert "torch.float32" in f.message and "torch.float64" in f.message and f.input == "x"


def test_gradient_mismatch_gives_expected_and_got():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    r = gradsmith.check(bugs_gradients.ExpDoubled, x, checks=["gradients"])
    f = _one(r, "gradient-mismatch")
    assert "x[0]" in f.message and "analytic" in f.message and "numerical" in f.message
    # The Jacobian entry quoted is d out[i]/d x[i]: backward says 2 e^x, the truth is e^x.
    entry = f.message.split("Jacobian entry")[1]
    assert "analytic" in entry
    analytic, numerical = report_entry(r)
    torch.testing.assert_close(analytic, 2 * x.exp().diag())
    torch.testing.assert_close(numerical, x.exp().diag(), atol=1e-7, rtol=1e-7)


def report_entry(report):
    return report.jacobians["x"]


def test_kink_info_reports_one_sided_derivatives():
    x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    r = gradsmith.check(correct.ReLUAtZero, x, checks=["gradients"])
    f = _one(r, "kink")
    assert f.severity == "info" and "x[1]" in f.message and "one-sided" in f.message


def test_double_backward_hint_offers_the_three_fixes():
    r = gradsmith.check(bugs_gradients.SigmoidSavesDerivative, torch.randn(4, dtype=torch.float64))
    f = _one(r, "double-backward-unsupported")
    assert "once_differentiable" in f.hint and "save" in f.hint and "recompute" in f.hint


def test_grad_output_mutation_names_the_output():
    r = gradsmith.check(bugs_state.ScaleMulGradInplace, torch.randn(4, dtype=torch.float64))
    f = _one(r, "grad-output-mutated")
    assert f.input == "out" and "in place" in f.message
