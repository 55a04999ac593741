"""A checked declaration line passes when pasted exactly as printed (issue 18, corpus 5 dev:
BiBERT's SymQuantizer). Forward clips to bounds held in a 2-element tensor that is not
differentiated, then quantises; backward passes the gradient inside the bounds. The line was
fitted and checked against the check's bounds (``x.clamp(-0.7, 0.6)``) but printed the bounds
as a fresh ``torch.randn(2)``, so the pasted line was checked against other bounds and
FAILed. Such a small setting is now written by value; with the line in place a planted wrong
backward still FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

QUANT = """\
import torch

import gradsmith

{line}
class ClipQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bounds, bits, per_tensor):
        ctx.save_for_backward(x, bounds)
        y = torch.where(x < bounds[1], x, bounds[1])
        y = torch.where(y > bounds[0], y, bounds[0])
        top = torch.max(torch.abs(y), dim=-1, keepdim=True)[0].expand_as(y).detach()
        s = (2 ** (bits - 1) - 1) / top
        return torch.round(y * s).div(s)

    @staticmethod
    def backward(ctx, grad_output):
        x, bounds = ctx.saved_tensors
        g = grad_output.clone()
        g[x.ge(bounds[{hi}])] = 0
        g[x.le(bounds[0])] = 0
        return g, None, None, None
"""
HAND = ("@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, "
        "requires_grad=True), torch.tensor([-0.7, 0.6], dtype=torch.float64), 4, False))")


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"pasted_settings_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path) -> str:
    fn = _load(tmp_path, "hand", QUANT.format(line=HAND, hi=1)).ClipQuant
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["verified"], finding.details["declaration"]
    return finding.details["declaration"]


def test_the_bounds_the_line_was_checked_against_are_printed_by_value(tmp_path):
    line = _printed(tmp_path)
    assert "torch.tensor([-0.7, 0.6], dtype=torch.float64)" in line, line
    # the independent reference: the clipped straight-through rule by hand
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    x = (torch.linspace(-2, 2, 41, dtype=torch.float64) + 0.013).requires_grad_()
    bounds = torch.tensor([-0.7, 0.6], dtype=torch.float64)
    surrogate(x, bounds, 4, False).sum().backward()
    torch.testing.assert_close(x.grad, ((x > -0.7) & (x < 0.6)).to(torch.float64))
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", QUANT.format(line=line, hi=1)).ClipQuant
    report = gradsmith.check(pasted, compat=False)
    assert report.passed, str(report)


def test_a_wrong_bound_in_backward_fails_with_the_line_in_place(tmp_path):
    line = _printed(tmp_path)
    # backward clips at the lower bound on both sides: the gradient is lost in (-0.7, 0.6)
    mutant = _load(tmp_path, "mutant", QUANT.format(line=line, hi=0)).ClipQuant
    torch.manual_seed(0)
    report = gradsmith.check(mutant, compat=False)
    assert not report.passed
    assert report.codes("error") & {"surrogate-mismatch", "gradient-mismatch"}, str(report)


@pytest.mark.parametrize("numel", [2, 16])
def test_only_small_settings_beside_differentiated_inputs_are_written_by_value(numel):
    from gradsmith.checker.suggest import render_args

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    setting = torch.arange(float(numel), dtype=torch.float64)
    text = render_args((x, setting))
    assert text.startswith("(torch.randn(3, 4, dtype=torch.float64).requires_grad_(), ")
    assert f"torch.tensor({setting.tolist()!r}, dtype=torch.float64)" in text
    large = render_args((x, torch.zeros(17, dtype=torch.float64)))
    assert "torch.randn(17, dtype=torch.float64)" in large
    # nothing marked: every floating tensor is differentiated, none is a setting
    assert render_args((x.detach(), setting)).endswith(
        f"torch.randn({numel}, dtype=torch.float64))")


TABLE = """\
import torch

import gradsmith

{line}
class TableClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, table):
        lo, hi = table.min(), table.max()
        ctx.save_for_backward(x, lo, hi)
        return torch.round(x.clamp(lo, hi) * 4) / 4

    @staticmethod
    def backward(ctx, grad_output):
        x, lo, hi = ctx.saved_tensors
        return grad_output * ((x > lo) & (x < hi)), None
"""
TABLE_HAND = ("@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, "
              "requires_grad=True), torch.randn(32, dtype=torch.float64)))")


def test_a_line_fitted_to_a_setting_it_draws_afresh_is_not_called_checked(tmp_path):
    """The window comes from a 32-value table, too large to print by value: the fitted
    ``x.clamp(lo, hi)`` holds for the check's table only, and the pasted line draws another."""
    fn = _load(tmp_path, "table", TABLE.format(line=TABLE_HAND)).TableClip
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert "torch.randn(32, dtype=torch.float64)" in line and "x.clamp(" in line, line
    assert not finding.details["verified"]
    assert "drawn afresh" in finding.hint
    # why (by hand): with another table, as the pasted line draws it, backward's window is
    # that table's [min, max] and the printed one is not
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    table = torch.randn(32, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    x = (torch.linspace(-4, 4, 801, dtype=torch.float64) + 0.0013).requires_grad_()
    surrogate(x, table).sum().backward()
    backward = ((x > table.min()) & (x < table.max())).to(torch.float64)
    assert not torch.equal(x.grad, backward)
