"""A spike whose surrogate's slope and scale are tensor arguments (a learnable surrogate: issue
18, corpus 9b held-out ``LearnableSurrogate``): forward ``(x >= 0)`` ignores ``alpha`` and
``beta``, backward returns ``grad * beta * alpha * s * (1 - s)`` (``s = sigmoid(alpha * x)``)
and ``None`` for both. The printed line was a template (``surrogate=lambda x, alpha, beta:
...``): the fitted ``torch.sigmoid(alpha * x)`` gave ``alpha`` an autograd gradient backward
rightly does not return. Now the line reads both from the arguments, detached, is checked,
passes pasted as printed, and agrees with the hand-written surrogate's autograd at other
``alpha`` and ``beta``; a backward that drops ``beta`` FAILs under the same line. A threshold
that forward compares with is not detached: a backward returning ``None`` for it still
disagrees with every surrogate of the spike.

Reduced case written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith
from gradsmith.discovery.synthesize import synthesize

HEADER = "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"

SOURCE = """
class LearnedSpike(Function):
    @staticmethod
    def forward(ctx, x, alpha, beta):
        ctx.save_for_backward(x, alpha, beta)
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, alpha, beta = ctx.saved_tensors
        s = torch.sigmoid(alpha * x)
        return g * alpha * s * (1 - s) * {scale}, None, None
"""

THRESHOLD = """
class ThresholdSpike(Function):
    @staticmethod
    def forward(ctx, x, threshold):
        ctx.save_for_backward(x, threshold)
        return (x >= threshold).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, threshold = ctx.saved_tensors
        s = torch.sigmoid(4 * (x - threshold))
        return g * 4 * s * (1 - s), None
"""


def _load(tmp_path, stem: str, text: str, name: str = "LearnedSpike"):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"learnable_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def _pasted(line: str, scale: str) -> str:
    return HEADER + SOURCE.format(scale=scale).replace("class", line + "\nclass")


def _line(report) -> tuple[str, bool]:
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding.details["declaration"], finding.details["verified"]


def test_a_learnable_surrogate_gets_a_line_read_from_its_arguments(tmp_path):
    fn = _load(tmp_path, "plain", HEADER + SOURCE.format(scale="beta"))
    torch.manual_seed(0)
    line, verified = _line(gradsmith.check(fn, *synthesize(fn).args, compat=False))
    assert verified and "..." not in line, line
    assert "alpha.detach()" in line and "beta.detach()" in line, line

    # The independent reference: at other alpha and beta than the check's, the printed
    # surrogate's autograd gradient is the hand-written beta * sigmoid(alpha * x)'s.
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    x = torch.linspace(-3, 3, 13, dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    beta = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    got = torch.autograd.grad(surrogate(x, alpha, beta).sum(), [x, alpha, beta],
                              allow_unused=True)
    (want,) = torch.autograd.grad((0.7 * torch.sigmoid(2.5 * x)).sum(), x)
    torch.testing.assert_close(got[0], want)
    assert got[1] is None and got[2] is None  # detached, as backward's None for them

    torch.manual_seed(0)
    assert gradsmith.check(_load(tmp_path, "pasted", _pasted(line, "beta")),
                           compat=False).passed
    # a backward that forgets beta (2 * ... where the line reads beta) fails under the line
    wrong = _pasted(line.replace("torch.tensor(1.0", "torch.tensor(0.5"), "1.0")
    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "wrong", wrong), compat=False)
    assert "surrogate-mismatch" in report.codes("error"), report

    # A threshold forward compares with is not detached.
    fn = _load(tmp_path, "threshold", HEADER + THRESHOLD, "ThresholdSpike")
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    threshold = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(0)
    line, verified = _line(gradsmith.check(fn, x, threshold, compat=False))
    assert "threshold.detach()" not in line, line
    # the surrogate of the spike gives the threshold minus x's gradient (autograd of
    # sigmoid(4 * (x - threshold))); backward returns None: no checked line can state it
    assert not verified, line
