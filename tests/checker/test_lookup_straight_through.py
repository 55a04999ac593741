"""A straight-through row lookup (issue 18, corpus 5 dev: ParallelWaveGAN's
VectorQuantizationStraightThrough, the VQ-VAE pattern): forward returns the table rows nearest
to each input row and their indices; backward passes the incoming gradient to the input
unchanged and gives the table the exact gradient of the row selection. Zero configuration
printed a template; now a surrogate that selects the rows again with autograd, checked against
backward, that passes as printed; with it in place a planted wrong backward (for the input or
for the table) FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

LOOKUP = """\
import torch
from torch.autograd import Function

import gradsmith


def nearest(inputs, table):
    flat = inputs.reshape(-1, table.size(1))
    return (flat[:, None, :] - table[None]).pow(2).sum(-1).argmin(dim=1)


{line}
class LookupST(Function):
    @staticmethod
    def forward(ctx, inputs, table):
        idx = nearest(inputs, table)
        ctx.save_for_backward(idx, table)
        ctx.mark_non_differentiable(idx)
        return torch.index_select(table, 0, idx).view_as(inputs), idx

    @staticmethod
    def backward(ctx, grad_output, grad_idx):
        idx, table = ctx.saved_tensors
        g_table = torch.zeros_like(table)
        g_table.index_add_(0, idx, {rows})
        return {passed}, g_table
"""
RIGHT = {"rows": "grad_output.reshape(-1, table.size(1))", "passed": "grad_output.clone()"}
WRONG = {"table gradient doubled": {"rows": "2 * grad_output.reshape(-1, table.size(1))"},
         "input gradient halved": {"passed": "grad_output / 2"}}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"lookup_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path) -> str:
    fn = _load(tmp_path, "plain", LOOKUP.format(line="", **RIGHT)).LookupST
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["verified"], finding.details["declaration"]
    return finding.details["declaration"]


def test_the_printed_line_selects_the_rows_again_and_passes_as_printed(tmp_path):
    line = _printed(tmp_path)
    assert "..." not in line
    module = _load(tmp_path, "pasted", LOOKUP.format(line=line, **RIGHT))
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch, "LookupST": module.LookupST})
    # the independent reference: straight-through to the input, autograd of table[idx]
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    table = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    idx = module.nearest(x.detach(), table.detach())
    want_table = torch.zeros_like(table).index_add(0, idx, v)
    got_x, got_table = torch.autograd.grad(surrogate(x, table), (x, table), v)
    torch.testing.assert_close(got_x, v)
    torch.testing.assert_close(got_table, want_table)
    torch.manual_seed(0)
    assert gradsmith.check(module.LookupST, compat=False).passed


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, kind):
    line = _printed(tmp_path)
    mutant = _load(tmp_path, "mutant", LOOKUP.format(line=line, **{**RIGHT, **WRONG[kind]}))
    torch.manual_seed(0)
    report = gradsmith.check(mutant.LookupST, compat=False)
    assert not report.passed
    assert "surrogate-mismatch" in report.codes("error"), str(report)
