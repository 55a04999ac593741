"""Scale-learning binarisers and a quantizer that returns its scale get a line that passes as
printed (issue 18, corpus 10b held-out, spent).

- A binariser ``sign(x)`` whose backward takes its amplitude from one tensor argument and its
  slope from another, element by element: IRNet's ``k * t * (1 - tanh(t * x) ** 2)`` and
  RBNN's ``k * (sqrt(2) |t| - t ** 2 |x|)_+`` (``k``, ``t`` synthesised with the input's
  shape). Before, only one tensor argument was read as a width or slope and the line was a
  template; now ``k.detach() * S(x * t.detach())`` (``t.detach().abs()`` for a slope read by
  its magnitude).
- A quantizer ``round(clamp(x / s)) * s`` with ``s`` computed from the input's moments
  (SAWB), returning ``s`` as a second output whose gradient backward drops: the kept output
  is piecewise constant only up to that scale, so it was no "ignored output" estimator and
  the line was a template; now ``(x, Fn.apply(...)[1].detach())``.

Each line is checked against an independent reference (the hand-written derivative at other
argument values), pasted above the class it passes, and a planted wrong backward FAILs under
it. Reduced cases written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith

HEADER = "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"

BINARISER = """
class Binariser(Function):
    @staticmethod
    def forward(ctx, x, k, t):
        ctx.save_for_backward(x, k, t)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        x, k, t = ctx.saved_tensors
        return {scale} * {derivative} * g, None, None
"""

# (backward's derivative as the projects write it, the same by hand for the reference)
TANH = ("k * t * (1 - torch.tanh(x * t) ** 2)",
        lambda x, k, t: k * t * (1 - torch.tanh(x * t) ** 2))
POLY = ("(k * (2 * torch.sqrt(t ** 2 / 2) - torch.abs(t ** 2 * x))).clamp(min=0)",
        lambda x, k, t: k * (2 ** 0.5 * t.abs() - t * t * x.abs()).clamp(min=0))


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"scale_learning_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _args(seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    k = torch.randn(3, 4, dtype=torch.float64, generator=gen).abs() + 0.1  # a scale
    t = torch.randn(3, 4, dtype=torch.float64, generator=gen)  # a slope of either sign
    return x, k, t


def _declaration(report) -> str:
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


def test_amplitude_and_slope_from_two_tensor_arguments(tmp_path):
    for stem, (derivative, hand) in (("tanh", TANH), ("poly", POLY)):
        fn = _load(tmp_path, stem, HEADER + BINARISER.format(scale="1",
                                                             derivative=derivative)).Binariser
        torch.manual_seed(0)
        line = _declaration(gradsmith.check(fn, *_args(1), compat=False))
        assert "k.detach() *" in line, line

        # The independent reference: at other k and t, the printed surrogate's autograd
        # derivative is the hand-written one.
        surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                         {"torch": torch})
        x, k, t = _args(2)
        x = torch.linspace(-3, 3, 12, dtype=torch.float64).reshape(3, 4).requires_grad_()
        (got,) = torch.autograd.grad(surrogate(x, k, t).sum(), x)
        torch.testing.assert_close(got, hand(x.detach(), k, t))


def test_the_binariser_line_passes_pasted_and_a_wrong_backward_fails(tmp_path):
    for stem, (derivative, _) in (("tanh", TANH), ("poly", POLY)):
        text = HEADER + BINARISER.format(scale="1", derivative=derivative)
        torch.manual_seed(0)
        line = _declaration(gradsmith.check(_load(tmp_path, f"fit_{stem}", text).Binariser,
                                            *_args(1), compat=False))

        def pasted(scale: str, line=line, derivative=derivative) -> str:
            return HEADER + BINARISER.format(scale=scale, derivative=derivative).replace(
                "class", line + "\nclass", 1)

        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, f"pasted_{stem}", pasted("1")).Binariser,
                                 compat=False)
        assert report.passed, (line, report)
        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, f"wrong_{stem}", pasted("1.5")).Binariser,
                                 compat=False)
        assert "surrogate-mismatch" in report.codes("error"), (line, report)


QUANTIZER = """
class ScaleQuant(Function):
    @staticmethod
    def forward(ctx, x, c1, c2, top, bottom):
        out = x.clone()
        with torch.no_grad():
            clip = c1 * torch.sqrt(torch.mean(x ** 2)) - c2 * torch.mean(x.abs())
            scale = 2 * clip / (top - bottom) + 1e-10
            out = {kept}
        return out, scale

    @staticmethod
    def backward(ctx, g, g_scale):
        return {grad}, None, None, None, None
"""
ROUNDED = "(out / scale).clamp(bottom, top).round() * scale"


def _quantizer_line(tmp_path, stem: str, kept: str):
    fn = _load(tmp_path, stem, HEADER + QUANTIZER.format(kept=kept, grad="g")).ScaleQuant
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(4),
                    requires_grad=True)
    torch.manual_seed(0)
    return gradsmith.check(fn, x, 3.0, 2.0, 7, -8, compat=False)


def test_a_quantizer_returning_its_scale_gets_a_checked_line(tmp_path):
    line = _declaration(_quantizer_line(tmp_path, "sawb", ROUNDED))
    assert "(x, ScaleQuant.apply(x, c1, c2, top, bottom)[1].detach())" in line, line

    # independent reference: the surrogate's gradient is the identity's for the quantized
    # output and none for the scale, whatever the incoming gradients
    module = _load(tmp_path, "sawb_ref", HEADER + QUANTIZER.format(kept=ROUNDED, grad="g"))
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch, "ScaleQuant": module.ScaleQuant})
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    out, scale = surrogate(x, 4.0, 1.0, 15, -16)
    g = torch.randn(5, dtype=torch.float64)
    (got,) = torch.autograd.grad(out, x, g)
    torch.testing.assert_close(got, g)
    assert not scale.requires_grad

    def pasted(grad: str) -> str:
        return HEADER + QUANTIZER.format(kept=ROUNDED, grad=grad).replace(
            "class", line + "\nclass", 1)

    torch.manual_seed(0)
    assert gradsmith.check(_load(tmp_path, "sawb_pasted", pasted("g")).ScaleQuant,
                           compat=False).passed
    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "sawb_wrong", pasted("2 * g")).ScaleQuant,
                             compat=False)
    assert "surrogate-mismatch" in report.codes("error"), report


def test_a_smooth_output_beside_a_dropped_scale_is_no_estimator(tmp_path):
    # x * mean|x| is smooth: dropping the scale's gradient beside it is the classic slip, and
    # no line is printed as checked for it
    report = _quantizer_line(tmp_path, "smooth", "out * x.abs().mean()")
    assert not report.passed
    for f in report.errors:
        if f.code == "undeclared-estimator":
            assert not f.details["verified"], f.details["declaration"]
