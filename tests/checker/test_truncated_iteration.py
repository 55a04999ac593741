"""A backward that is the gradient of an iteration cut short (issue 18, corpus 8a held-out:
DifferentiableSVD's ``Sqrtm``, an SVD square root whose backward is that of ``iterN``
Newton-Schulz steps). Zero configuration reported a gradient-mismatch and no line; now, as the
count argument is doubled and the mismatch shrinks to agreement, an ``undeclared-estimator``
with a line checking the Function at the converged count, which passes as printed. A wrong
backward (a factor, an extra term, a truncation that does not converge) keeps its
gradient-mismatch and gets no line, and with the line in place a planted wrong backward
FAILs. The reduced case: ``sqrt`` forward, backward the gradient of ``n`` Heron steps."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

import gradsmith

SOURCE = """\
import torch
from torch.autograd import Function

import gradsmith


def heron(x, n):
    y = torch.ones_like(x)
    for _ in range(n):
        y = (y + x / y) / 2
    return y


{line}
class HeronSqrt(Function):
    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return torch.sqrt(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            (got,) = torch.autograd.grad(heron(leaf, ctx.n), leaf, grad)
        return {returned}, None
"""
RIGHT = "got"
WRONG = {"twice the gradient": "2 * got", "an extra term": "got + 0.1 * grad",
         # the gradient of 2 steps whatever the count: it never converges
         "a count backward ignores": "torch.func.grad(lambda t: (heron(t, 2) * grad).sum())(x)"}


def _load(tmp_path, stem: str, returned: str, line: str = ""):
    path = tmp_path / f"{stem}.py"
    path.write_text(SOURCE.format(line=line, returned=returned))
    spec = importlib.util.spec_from_file_location(f"truncated_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.HeronSqrt


def _inputs():
    gen = torch.Generator().manual_seed(0)
    x = 4 + 5 * torch.rand(3, 4, generator=gen, dtype=torch.float64)
    return x.requires_grad_(), 2


@pytest.fixture(scope="module")
def line(tmp_path_factory):
    fn = _load(tmp_path_factory.mktemp("plain"), "plain", RIGHT)
    report = gradsmith.check(fn, *_inputs(), compat=False)
    assert "gradient-mismatch" not in report.codes("error")
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["estimator"] == {"x": "truncated"}
    assert finding.details["verified"] and "..." not in finding.details["declaration"]
    assert "not verified" in finding.hint  # the truncation at n=2 itself has no reference
    return finding.details["declaration"]


def test_the_line_checks_a_count_where_backward_is_forwards_gradient(tmp_path, line):
    # the printed count: doubled from 2 until agreement (8 Heron steps from 1 are exact to
    # float64 for x in [4, 9]); the printed values: the check's own inputs
    factory = eval(line.removeprefix("@gradsmith.example(")[:-1], {"torch": torch})  # noqa: S307
    x, n = factory()
    assert n == 8
    torch.testing.assert_close(x, _inputs()[0].detach(), rtol=0, atol=0)
    # independent reference: autograd of torch.sqrt at that count
    fn = _load(tmp_path, "reference", RIGHT)
    leaf = x.clone().requires_grad_()
    v = torch.randn(3, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(fn.apply(leaf, n), leaf, v)
    torch.testing.assert_close(got, v / (2 * x.sqrt()))


def test_the_line_passes_as_printed(tmp_path, line):
    fn = _load(tmp_path, "pasted", RIGHT, line)
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    assert report.passed, report.codes("error")


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, line, kind):
    fn = _load(tmp_path, "mutant", WRONG[kind], line)
    torch.manual_seed(0)
    assert "gradient-mismatch" in gradsmith.check(fn, compat=False).codes("error")


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_wrong_backward_stays_a_gradient_mismatch_with_no_line(tmp_path, line, kind):
    # where the right backward gets its line (the fixture), a wrong one gets none
    fn = _load(tmp_path, "wrong", WRONG[kind])
    report = gradsmith.check(fn, *_inputs(), compat=False)
    assert "gradient-mismatch" in report.codes("error")
    assert "undeclared-estimator" not in report.codes("error")


def test_a_line_drawing_its_tensor_afresh_is_not_called_checked(tmp_path, line):
    # 81 elements: written as torch.randn, the pasted line would check other values than
    # those measured (an SPD matrix would not stay one)
    fn = _load(tmp_path, "large", RIGHT)
    gen = torch.Generator().manual_seed(1)
    x = (4 + 5 * torch.rand(9, 9, generator=gen, dtype=torch.float64)).requires_grad_()
    report = gradsmith.check(fn, x, 2, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert not finding.details["verified"]
    assert "torch.randn(9, 9" in finding.details["declaration"]
    assert "drawn afresh" in finding.hint
