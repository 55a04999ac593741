"""An injected gradient that ignores the incoming one (issue 18, corpus 7a dev: seistorch's
``ReverseTimeMigration``, a constant 0 loss whose backward returns the observed data as the
adjoint source of the synthetic data, so that backpropagating through a wave simulation
migrates it). Zero configuration printed a ``surrogate=lambda x, y: ...`` template; now
``intended=lambda x, y, grad: (y, None)`` checked against backward (for two incoming
gradients), which passes as printed, and with it in place a planted wrong backward FAILs.
A forward that reads the input keeps no such line: returning a constant there forgot the
incoming gradient."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

SOURCE = """\
import torch
from torch.autograd import Function

import gradsmith


{line}
class Migration(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return torch.tensor(0.0, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        syn, obs = ctx.saved_tensors
        return {returned}, None
"""
RIGHT = "obs"
WRONG = {"scaled by the incoming gradient": "obs * grad_output", "negated": "-obs",
         "the synthetic data": "syn", "doubled": "2 * obs"}

READS = """\
import torch
from torch.autograd import Function


class Misfit(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ((x - y) ** 2).sum().round()

    @staticmethod
    def backward(ctx, grad_output):
        syn, obs = ctx.saved_tensors
        return obs, None
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"adjoint_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _finding(fn):
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding


@pytest.fixture(scope="module")
def line(tmp_path_factory):
    module = _load(tmp_path_factory.mktemp("plain"), "plain",
                   SOURCE.format(line="", returned=RIGHT))
    finding = _finding(module.Migration)
    assert finding.details["verified"], finding.details["declaration"]
    return finding.details["declaration"]


def test_the_line_injects_the_observed_data(line):
    assert line.endswith("intended=lambda x, y, grad: (y, None))"), line


def test_the_line_passes_as_printed(tmp_path, line):
    fn = _load(tmp_path, "pasted", SOURCE.format(line=line, returned=RIGHT)).Migration
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    assert report.passed, report.codes("error")
    # the independent reference: backward's gradient is the observed data, whatever the
    # incoming gradient
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(fn.apply(x, y), x, torch.tensor(3.0, dtype=torch.float64))
    torch.testing.assert_close(got, y)


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, line, kind):
    fn = _load(tmp_path, "mutant", SOURCE.format(line=line, returned=WRONG[kind])).Migration
    torch.manual_seed(0)
    assert "intended-mismatch" in gradsmith.check(fn, compat=False).codes("error")


def test_a_forward_that_reads_the_input_gets_no_checked_line(tmp_path, line):
    # where the constant loss gets its line (the fixture), a rounded misfit returning the
    # observed data gets none: its backward forgot the incoming gradient
    finding = _finding(_load(tmp_path, "reads", READS).Misfit)
    assert not finding.details["verified"] or "(y, None)" not in finding.details["declaration"]
