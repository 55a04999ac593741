"""What a plain ``gradsmith.check(fn, *inputs)`` runs: the eager checks (a unit test asking
"are my gradients right"), with the deployment matrix one option away (``compat=True``), and
``gradsmith check`` running the whole matrix unless told otherwise (issue 21)."""

from __future__ import annotations

import json

import deploy_cases as D
import pytest
import torch

from gradsmith import GradsmithError
from gradsmith.checker import check
from gradsmith.checker.deploy import DEPLOY_MODULES, OPT_IN
from gradsmith.checker.deploy.matrix import COLUMNS
from gradsmith.testing import assert_gradients


def test_plain_call_runs_the_eager_checks_only():
    report = check(D.BrokenNaiveVariance, *D._offset())
    assert report.compat == {}
    assert not set(report.checks) & set(DEPLOY_MODULES)
    assert {"structure", "gradients", "second_order"} <= set(report.checks)
    # The eager verdict of this variance is right in float64 (its float32 cancellation is a
    # deployment finding): compare with autograd of the same expression.
    (x,) = D._offset()
    x = x.detach().requires_grad_(True)
    (want,) = torch.autograd.grad((x * x).mean() - x.mean() ** 2, x)
    (got,) = torch.autograd.grad(D.BrokenNaiveVariance.apply(x), x)
    torch.testing.assert_close(got, want)
    assert report.passed, str(report)


def test_compat_true_runs_the_whole_matrix():
    report = check(D.BrokenNaiveVariance, *D._offset(), compat=True)
    assert list(report.compat) == list(COLUMNS)
    # The opt-in onnx check (seconds per Function, an extra) runs only when asked for.
    assert set(DEPLOY_MODULES) - {"custom_op", *OPT_IN} <= set(report.checks) | set(report.skipped)
    assert not set(OPT_IN) & set(report.checks)
    assert report.compat["float32"]["status"] == "fail" and not report.passed


def test_checks_naming_a_deployment_check_runs_it_and_compat_false_still_wins():
    named = check(D.OkVariance, *D._offset(), checks=["gradients", "precision"])
    assert named.checks == ["gradients", "precision"] and "float32" in named.compat
    off = check(D.OkVariance, *D._offset(), checks=["gradients", "precision"], compat=False)
    assert off.checks == ["gradients"] and off.compat == {}


def test_compat_must_be_a_bool():
    with pytest.raises(GradsmithError, match=r"compat must be True or False, got 'yes'"):
        check(D.OkVariance, *D._offset(), compat="yes")


def test_assert_gradients_follows_check():
    assert_gradients(D.BrokenNaiveVariance, *D._offset())  # eager: right
    with pytest.raises(AssertionError, match="float32"):
        assert_gradients(D.BrokenNaiveVariance, *D._offset(), compat=True)


OWN_OPTION = """
import torch
from torch.autograd import Function
import gradsmith


def _x():
    return (torch.randn(5, dtype=torch.float64, requires_grad=True),)


@gradsmith.example(_x)
class Triple(Function):
    @staticmethod
    def forward(ctx, x):
        return 3 * x

    @staticmethod
    def backward(ctx, grad):
        return 3 * grad


@gradsmith.example(_x, compat=False)
class Quadruple(Function):
    @staticmethod
    def forward(ctx, x):
        return 4 * x

    @staticmethod
    def backward(ctx, grad):
        return 4 * grad
"""


def test_cli_runs_the_matrix_by_default_below_an_examples_own_compat(tmp_path, monkeypatch,
                                                                     capsys):
    from gradsmith.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.py").write_text(OWN_OPTION)
    code = main(["check", "ops.py", "--no-isolate", "--format", "json"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert code == 0
    assert list(rows["ops.py::Triple"]["report"]["compat"]) == list(COLUMNS)
    assert rows["ops.py::Quadruple"]["report"]["compat"] == {}  # the example said so
    code = main(["check", "ops.py", "--no-isolate", "--format", "json", "--compat"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert list(rows["ops.py::Quadruple"]["report"]["compat"]) == list(COLUMNS)
