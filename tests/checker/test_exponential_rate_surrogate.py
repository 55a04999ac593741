"""A stochastic spike whose backward is the derivative of an exponential firing rate (issue 18,
corpus 8b dev: ``phi * exp(beta * (x - theta))`` drawn as a Bernoulli, backward
``g * phi * beta * exp(beta * (x - theta))``) got a template ``surrogate=lambda ...: ...`` that
cannot pass, while its logistic sibling got a checked line: no surrogate family had an
unbounded ``exp``. Now the printed line is checked, is the rate itself (independent reference:
autograd of the hand-written rate) and passes pasted as printed; a backward with a doubled
slope FAILs under the same line.

Reduced case written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith
from gradsmith.checker import surrogate_fit
from gradsmith.discovery.synthesize import synthesize

HEADER = "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"

SOURCE = """
def _fire(rate):
    return (rate >= torch.rand_like(rate)).to(rate)


class ExpFiring(Function):
    @staticmethod
    def forward(ctx, x, f_thres: float, beta: float, theta: float):
        ctx.save_for_backward(x)
        ctx.f_thres, ctx.beta, ctx.theta = f_thres, beta, theta
        return _fire(f_thres * torch.exp(beta * (x - theta)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        rate = ctx.f_thres * torch.exp(ctx.beta * (x - ctx.theta))
        return g * rate * {slope}, None, None, None
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"exp_rate_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ExpFiring


def _pasted(line: str, slope: str) -> str:
    """The module with ``line`` pasted above the class, as a user would."""
    return HEADER + SOURCE.format(slope=slope).replace("class", line + "\nclass")


def test_the_exponential_rate_gets_a_checked_line_that_passes_as_printed(tmp_path):
    fn = _load(tmp_path, "plain", HEADER + SOURCE.format(slope="ctx.beta"))
    torch.manual_seed(0)
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "torch.exp(" in line and "..." not in line, line

    # The independent reference: the printed surrogate's autograd gradient is the hand-written
    # rate's, at the line's own hyperparameters.
    args = eval(line[len("@gradsmith.example("):].split(", surrogate=")[0],  # noqa: S307
                {"torch": torch})()
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    x = torch.linspace(-3, 3, 13, dtype=torch.float64, requires_grad=True)
    _, f_thres, beta, theta = args
    (got,) = torch.autograd.grad(surrogate(x, f_thres, beta, theta).sum(), x)
    (want,) = torch.autograd.grad((f_thres * torch.exp(beta * (x - theta))).sum(), x)
    torch.testing.assert_close(got, want)

    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", _pasted(line, "ctx.beta"))
    again = gradsmith.check(pasted, compat=False)
    assert again.passed, f"{line}\n{again}"
    # a backward that doubles the slope fails under the same line
    torch.manual_seed(0)
    wrong = _load(tmp_path, "wrong", _pasted(line, "2 * ctx.beta"))
    assert "surrogate-mismatch" in gradsmith.check(wrong, compat=False).codes("error")


U = torch.cat([torch.linspace(-4, 4, 161, dtype=torch.float64),
               torch.tensor([-1e3, -100, -30, -10, 10, 30, 100, 1e3], dtype=torch.float64)])


def test_the_fit_recovers_amplitude_and_slope_and_rejects_other_shapes():
    for amplitude, slope in ((0.3, 2.0), (0.5, 1.0), (-2.0, 0.25), (1.5, 7.0)):
        d = amplitude * slope * torch.exp(slope * U)
        keep = torch.isfinite(d)  # as the oracle samples it: an overflowed exp is left out
        fit = surrogate_fit._fit_exp(U[keep], d[keep], torch.exp)
        torch.testing.assert_close(torch.tensor(fit, dtype=torch.float64),
                                   torch.tensor((amplitude, slope), dtype=torch.float64),
                                   rtol=1e-9, atol=0.0)
    s = torch.sigmoid(2 * U)
    assert surrogate_fit._fit_exp(U, 2 * s * (1 - s), torch.exp) is None  # a bump
    capped = torch.exp(U).clamp(max=5.0)  # an exponential clipped above: not one
    assert surrogate_fit._fit_exp(U, capped, torch.exp) is None


def test_an_infinite_declared_gradient_at_scale_is_not_an_overflow(tmp_path):
    # At 300 x inputs above 2.4, exp overflows: the exponential rate's true derivative is
    # infinite there, and backward returns exactly that. Declared, it is what was declared
    # (before: nan-gradient-at-scale whenever the example drew such a value).
    line = ("@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64) + 3.0, 0.5, "
            "1.0, 0.0), surrogate=lambda x, f_thres, beta, theta: f_thres * torch.exp(beta * "
            "(x - theta)))")
    x = torch.randn(3, 4, dtype=torch.float64) + 3.0
    assert not bool(torch.isfinite(torch.exp(300 * x)).all())  # the reference: it overflows
    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "big", _pasted(line, "ctx.beta")), compat=False)
    assert report.passed, report
    assert "nan-gradient-at-scale" not in report.codes()
