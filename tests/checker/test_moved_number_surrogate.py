"""A printed surrogate that names a Python-number argument is read from it, not lucky (issue
18, corpus 10 dev ``ZIF``, spent): a triangle window of width ``w`` (a Python float) whose
backward is ``g * (1 / w) ** 2 * (w - |x|).clamp(min=0)`` has amplitude ``c * w = 1`` for
every ``w``. Fitted at ``w = 0.5`` the amplitude was printed as ``2 * w`` (1 there, wrong at
every other width): the line passed at the printed example and FAILed the Function as written
at ``w = 1.0``. Now a term naming ``w`` must also match backward with ``w`` moved, so the line
reads ``1``; a triangle whose amplitude truly is ``2 * w`` keeps it. Each line passes applied
at another width, checked against the hand-written derivative of the surrogate, and a
planted wrong backward still FAILs under it. The same holds for the factor of a gradient
reversal: ``-alpha * grad`` only where backward reads ``alpha``.

Reduced cases written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith

HEADER = "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"

SOURCE = """
class Triangle(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.w = w
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        w = ctx.w
        return g * {scale} * {window}, None
"""

# (backward's window, the surrogate derivative by hand at width w)
UNIT_AREA = ("(1 / w) ** 2 * (w - x.abs()).clamp(min=0)",
             lambda x, w: (w - x.abs()).clamp(min=0) / w ** 2)
HEIGHT_TWO = ("2 * (1 - x.abs() / w).clamp(min=0)",
              lambda x, w: 2 * (1 - x.abs() / w).clamp(min=0))


def _load(tmp_path, stem: str, text: str):
    return _load_module(tmp_path, stem, text).Triangle


def _line(tmp_path, stem: str, window: str) -> str:
    fn = _load(tmp_path, stem, HEADER + SOURCE.format(scale="1", window=window))
    x = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                    requires_grad=True)
    torch.manual_seed(0)
    report = gradsmith.check(fn, x, 0.5, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


def test_a_width_named_in_the_line_is_read_from_the_argument(tmp_path):
    # the unit-area triangle loses the lucky 2 * w, the height-two one keeps the true one
    for stem, (window, derivative), amplitude in (("unit", UNIT_AREA, False),
                                                  ("two", HEIGHT_TWO, True)):
        line = _line(tmp_path, stem, window)
        assert ("2 * w" in line) == amplitude, line

        # The independent reference: at widths other than the check's 0.5, the printed
        # surrogate's autograd derivative is the hand-written triangle's.
        surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                         {"torch": torch})
        x = torch.linspace(-2, 2, 41, dtype=torch.float64, requires_grad=True)
        for w in (1.0, 0.3):
            (got,) = torch.autograd.grad(surrogate(x, w).sum(), x)
            torch.testing.assert_close(got, derivative(x.detach(), w))


def test_the_line_passes_pasted_at_another_width_and_a_wrong_backward_fails(tmp_path):
    for stem, (window, _) in (("unit", UNIT_AREA), ("two", HEIGHT_TWO)):
        # the printed line with the example's width moved to 1.0 (the project's default)
        line = _line(tmp_path, f"fit_{stem}", window).replace(", 0.5)", ", 1.0)")
        assert ", 1.0)" in line, line

        def pasted(scale: str, line=line, window=window) -> str:
            return HEADER + SOURCE.format(scale=scale, window=window).replace(
                "class", line + "\nclass", 1)

        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, f"pasted_{stem}", pasted("1")), compat=False)
        assert report.passed, (line, report)
        # a planted wrong backward (amplitude 1.5 times too large) FAILs under the same line
        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, f"wrong_{stem}", pasted("1.5")), compat=False)
        assert "surrogate-mismatch" in report.codes("error"), (line, report)


def test_a_moved_width_that_forward_rejects_says_nothing(tmp_path):
    # forward accepts widths up to 0.5 only: w = 0.75 raises and is skipped, w = 0.375 still
    # tells the lucky 2 * w from the true amplitude 1
    guarded = SOURCE.format(scale="1", window=UNIT_AREA[0]).replace(
        "        ctx.save_for_backward(x)\n",
        "        if not 0 < w <= 0.5:\n            raise ValueError(f'w must be in (0, 0.5]')\n"
        "        ctx.save_for_backward(x)\n", 1)
    fn = _load(tmp_path, "guarded", HEADER + guarded)
    x = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                    requires_grad=True)
    torch.manual_seed(0)
    report = gradsmith.check(fn, x, 0.5, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line and "2 * w" not in line, line
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    x = torch.linspace(-1, 1, 21, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(surrogate(x, 0.25).sum(), x)
    torch.testing.assert_close(got, UNIT_AREA[1](x.detach(), 0.25))


REVERSAL = """
class Reversal(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return {grad}, None
"""


def test_a_scale_named_after_a_number_is_read_from_it(tmp_path):
    # a reversal that ignores alpha got -alpha * grad at alpha = 1 (lucky); one that reads
    # alpha keeps it; each line holds at alpha = 2.5 (by hand: -g and -2.5 g) and pasted there
    for stem, grad, named, factor in (("flip", "-g", False, 1.0),
                                      ("scaled", "-ctx.alpha * g", True, 2.5)):
        text = HEADER + REVERSAL.format(grad=grad)
        fn = _load_module(tmp_path, stem, text).Reversal
        x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(5),
                        requires_grad=True)
        torch.manual_seed(0)
        report = gradsmith.check(fn, x, 1.0, compat=False)
        (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
        line = finding.details["declaration"]
        assert finding.details["verified"] and ("alpha * grad" in line) == named, line
        intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                        {"torch": torch})
        g = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
        got, none = intended(x.detach(), 2.5, g)
        torch.testing.assert_close(got, -factor * g)
        assert none is None

        pasted = text.replace("class", line.replace(", 1.0)", ", 2.5)") + "\nclass", 1)
        torch.manual_seed(0)
        report = gradsmith.check(_load_module(tmp_path, f"{stem}_pasted", pasted).Reversal, compat=False)
        assert report.passed, (line, report)


def _load_module(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"moved_number_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SLOPED = """
import math


class Sloped(Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * {derivative}, None
"""


def test_an_amplitude_that_undoes_the_slope_is_read_from_it(tmp_path):
    # fast sigmoid 1 / (1 + beta |x|)^2 (SuperSpike) and atan 1 / (pi (1 + (pi beta x)^2)):
    # the amplitude 1 / beta (1 / (pi^2 beta)) was printed as the literal of the check's beta
    for stem, derivative, beta, hand in (
            ("fast", "1.0 / (1.0 + ctx.beta * x.abs()) ** 2", 10.0,
             lambda x, b: 1 / (1 + b * x.abs()) ** 2),
            ("atan", "1.0 / (math.pi * (1 + (math.pi * ctx.beta * x) ** 2))", 2.0,
             lambda x, b: 1 / (torch.pi * (1 + (torch.pi * b * x) ** 2)))):
        fn = _load_module(tmp_path, stem, HEADER + SLOPED.format(derivative=derivative)).Sloped
        x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(7),
                        requires_grad=True)
        torch.manual_seed(0)
        report = gradsmith.check(fn, x, beta, compat=False)
        (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
        line = finding.details["declaration"]
        assert finding.details["verified"], line
        surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                         {"torch": torch})
        xs = torch.linspace(-2, 2, 41, dtype=torch.float64, requires_grad=True)
        for b in (beta * 1.7, beta / 3):
            (got,) = torch.autograd.grad(surrogate(xs, b).sum(), xs)
            torch.testing.assert_close(got, hand(xs.detach(), b))
