"""A gradient reversal that also clips what flows back gets a printed ``intended=`` that passes
as printed (issue 18, corpus 13c dev: Multilingual_Text_to_Speech's speaker-adversarial
``GradientReversalFunction``, ``-l * grad.clamp(-c, c)``).

The check's incoming gradient stayed inside ``c``, so the plain ``-l * grad`` matched there and
was printed; drawn afresh it did not, and the line was an unchecked one to complete. Now each
scaled candidate must also match backward for a fresh incoming gradient four times as large,
and the candidates include the scale applied to the gradient clipped by a forward number. The
references are the hand-written ``-l * clamp(g, -c, c)``; a plain reversal (``c`` unused) keeps
the plain line; a planted wrong backward (clipped at twice ``c``) FAILs under the pasted line.

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
class Reversal(Function):
    @staticmethod
    def forward(ctx, x, l, c):
        ctx.l = l
        ctx.c = c
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return {grad}, None, None
"""

CLIPPED = "-ctx.l * g.clamp(-ctx.c, ctx.c)"


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"clipped_reversal_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Reversal


def _line(tmp_path, stem: str, grad: str) -> str:
    fn = _load(tmp_path, stem, HEADER + SOURCE.format(grad=grad))
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(5),
                    requires_grad=True)
    torch.manual_seed(0)
    # c = 4: no element of the check's standard-normal incoming gradient reaches the clip
    report = gradsmith.check(fn, x, 1.0, 4.0, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


def _intended(line: str):
    return eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                {"torch": torch})


def test_a_clipped_reversal_gets_the_clip_and_a_plain_one_does_not(tmp_path):
    g = 3 * torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    x = torch.zeros(3, 4, dtype=torch.float64)
    for stem, grad, hand in (("clipped", CLIPPED, lambda g, s, c: -s * g.clamp(-c, c)),
                             ("plain", "-ctx.l * g", lambda g, s, c: -s * g)):
        line = _line(tmp_path, stem, grad)
        assert ("clamp(-c, c)" in line) == (stem == "clipped"), line
        # the independent reference, at other values than the check's (l = 0.7, c = 0.5)
        got, *nones = _intended(line)(x, 0.7, 0.5, g)
        torch.testing.assert_close(got, hand(g, 0.7, 0.5))
        assert nones == [None, None]


def test_the_line_passes_pasted_and_a_wrong_backward_fails(tmp_path):
    # pasted with c = 0.5, where the check's incoming gradients do reach the clip
    line = _line(tmp_path, "fit", CLIPPED).replace(", 1.0, 4.0)", ", 0.7, 0.5)")
    assert ", 0.7, 0.5)" in line, line

    def pasted(grad: str) -> str:
        return HEADER + SOURCE.format(grad=grad).replace("class", line + "\nclass", 1)

    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "pasted", pasted(CLIPPED)), compat=False)
    assert report.passed, (line, report)
    # a planted wrong backward: the clip at twice c
    torch.manual_seed(0)
    wrong = _load(tmp_path, "wrong", pasted("-ctx.l * g.clamp(-2 * ctx.c, 2 * ctx.c)"))
    report = gradsmith.check(wrong, compat=False)
    assert "intended-mismatch" in report.codes("error"), (line, report)
