"""Attributes only backward reads, and errors on objects gradsmith invented (issue 18).

mri-nufft's ``_NUFFT_OP`` (reduced here, written anew) takes an operator object: forward calls
``op.project(x)``; backward hands ``ctx.op`` to helpers that test ``op.with_data_grad`` and call
``op.back_project(g)``. Zero-configuration inputs gave it a namespace with forward's attribute
only, and backward's ``AttributeError`` was reported as the Function's ``backward-error``.
Now the namespace also has what backward reads, and an error raised on a line that uses an
invented object is ``invented-input`` (INCOMPLETE), never a defect; a user's own object, or
a wrong gradient, still fails.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import types

import pytest
import torch

import gradsmith
from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source
from gradsmith.discovery.backward_attributes import backward_attributes
from gradsmith.discovery.builders import Invented

OPS = '''
import torch
from torch.autograd import Function


def _data_grad(op, g):
    if not op.with_data_grad:
        return None
    return op.back_project(g)


def _grid_grad(op, x, g):
    if not op.with_grid_grad:
        return None
    rows = [torch.sum(g * op.project(x) * s) for s in op.grid]  # a shape: a real op has one
    return torch.stack(rows)


class Project(Function):
    @staticmethod
    def forward(ctx, x, op):
        ctx.save_for_backward(x)
        ctx.op = op
        return op.project(x * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * _data_grad(ctx.op, g), None


class ProjectWrong(Function):
    @staticmethod
    def forward(ctx, x, op):
        ctx.save_for_backward(x)
        ctx.op = op
        return op.project(x * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * _data_grad(ctx.op, g), None  # planted: the factor x dropped


class ProjectOnGrid(Function):
    @staticmethod
    def forward(ctx, x, grid_pos, op):
        ctx.save_for_backward(x)
        ctx.op = op
        return op.project(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _data_grad(ctx.op, g), _grid_grad(ctx.op, x, g), None
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("invented")
    folder = root / "nufft_like"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "ops.py").write_text(textwrap.dedent(OPS))
    sys.path.insert(0, str(root))
    try:
        ops = importlib.import_module("nufft_like.ops")
        result = run_check([Source("file", str(folder / "ops.py"), "nufft_like/ops.py")],
                           isolate=False)
        yield ops, {r["name"].split("::")[1]: r for r in result.rows}
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.split(".")[0] == "nufft_like"]:
            del sys.modules[name]


def test_backward_reads_through_a_helper_are_read(rows):
    ops, _ = rows
    assert backward_attributes(ops.Project, "op") == {"back_project": "call",
                                                      "with_data_grad": "bool"}


def test_an_attribute_only_backward_reads_is_given_and_the_check_passes(rows):
    ops, found = rows
    row = found["Project"]
    assert row["verdict"] == "pass", row["text"]
    assert "back_project=identity" in row["inputs"] and "with_data_grad=True" in row["inputs"]
    # the gradient it passed with is autograd's of the same map (the identity projection)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    op = Invented(project=lambda t: t, back_project=lambda t: t, with_data_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(ops.Project.apply(x, op), x, g)
    torch.testing.assert_close(got, torch.autograd.grad(x * x, x, g)[0])


def test_a_wrong_gradient_still_fails(rows):
    _, found = rows
    row = found["ProjectWrong"]
    assert row["verdict"] == "fail" and "gradient-mismatch" in row["text"], row["text"]


def test_an_error_on_an_invented_object_is_incomplete_not_a_defect(rows):
    _, found = rows
    row = found["ProjectOnGrid"]
    assert row["verdict"] == "fail" and row["error"] == "incomplete", row["text"]
    assert "invented-input" in row["text"] and "backward-error" not in row["text"]


class _Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        ctx.cfg = cfg
        return x * cfg.scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.cfg.scale * ctx.cfg.gain, None


def test_the_checker_tells_an_invented_object_from_the_users_own():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    mine = gradsmith.check(_Scaled, x, types.SimpleNamespace(scale=2.0))
    assert mine.verdict == "FAILED" and "backward-error" in mine.codes("error")
    invented = gradsmith.check(_Scaled, x, Invented(scale=2.0))
    assert invented.verdict == "INCOMPLETE", invented.summary()
    assert invented.codes("warning") >= {"invented-input"} and not invented.codes("error")
    # with the attribute there, the gradient is checked: right at gain 1, wrong at gain 2
    assert gradsmith.check(_Scaled, x, Invented(scale=2.0, gain=1.0)).passed
    assert "gradient-mismatch" in gradsmith.check(_Scaled, x, Invented(scale=2.0, gain=2.0)
                                                  ).codes("error")


class _ShapeBug(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        ctx.cfg = cfg
        return x * cfg.scale

    @staticmethod
    def backward(ctx, g):
        cfg = ctx.cfg
        return (g * cfg.scale) @ torch.ones(3, 3, dtype=g.dtype), None  # planted: shapes


def test_a_shape_error_beside_an_invented_object_stays_backwards():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(_ShapeBug, x, Invented(scale=2.0))
    assert report.verdict == "FAILED" and "backward-error" in report.codes("error")
