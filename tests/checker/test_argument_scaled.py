"""A straight-through estimator scaled element by element by a forward argument (issue 18,
corpus 8b held-out: csyhhu's ``Function_unbiased_quantize_STE``, an incremental-quantisation
mask the caller passes in). Zero configuration printed a ``surrogate=lambda w, bits, mask:
...`` template; now a surrogate ``w * mask`` checked against backward that passes as printed,
with one output and with two (the second ignored by backward), and with it in place a planted
wrong backward FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

SOURCE = """\
import torch
from torch.autograd import Function

import gradsmith

{line_two}
class TwoOut(Function):
    @staticmethod
    def forward(ctx, w, bits, mask):
        ctx.save_for_backward(mask)
        n = 2 ** (bits - 1)
        code = torch.clip(torch.round(w * n), -n, n - 1)
        return code / n, code

    @staticmethod
    def backward(ctx, grad, grad_code):
        (mask,) = ctx.saved_tensors
        return {returned}, None, None


{line_one}
class OneOut(Function):
    @staticmethod
    def forward(ctx, w, mask):
        ctx.save_for_backward(mask)
        return torch.round(w * 4) / 4

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return {returned}, None
"""
RIGHT = "grad * mask"
WRONG = {"mask dropped": "grad.clone()", "twice the mask": "2 * grad * mask",
         "the mask's complement": "grad * (1 - mask)"}
NAMES = ("OneOut", "TwoOut")


def _load(tmp_path, stem: str, returned: str, lines=("", "")):
    path = tmp_path / f"{stem}.py"
    path.write_text(SOURCE.format(line_one=lines[0], line_two=lines[1], returned=returned))
    spec = importlib.util.spec_from_file_location(f"argument_scaled_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(fn) -> str:
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    module = _load(tmp_path_factory.mktemp("plain"), "plain", RIGHT)
    return tuple(_printed(getattr(module, name)) for name in NAMES)


def test_the_printed_surrogates_scale_by_the_mask(lines):
    one, two = lines
    assert one.endswith("surrogate=lambda w, mask: w * mask)"), one
    assert "surrogate=lambda w, bits, mask: (w * mask, TwoOut.apply(" in two, two
    # the independent reference: autograd of the printed surrogate gives grad * mask for w
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", one).group(1),  # noqa: S307
                     {"torch": torch})
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    mask = (torch.rand(3, 4, dtype=torch.float64) > 0.5).to(torch.float64)
    v = torch.randn(3, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(surrogate(w, mask), w, v)
    torch.testing.assert_close(got, v * mask)


def test_both_lines_pass_as_printed(tmp_path, lines):
    pasted = _load(tmp_path, "pasted", RIGHT, lines)
    for name in NAMES:
        torch.manual_seed(0)
        report = gradsmith.check(getattr(pasted, name), compat=False)
        assert report.passed, (name, report.codes("error"))


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_lines_in_place(tmp_path, lines, kind):
    mutant = _load(tmp_path, "mutant", WRONG[kind], lines)
    for name in NAMES:
        torch.manual_seed(0)
        report = gradsmith.check(getattr(mutant, name), compat=False)
        assert "surrogate-mismatch" in report.codes("error"), (name, report.codes("error"))

