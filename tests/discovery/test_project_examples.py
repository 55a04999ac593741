"""Inputs from the project's own examples and tests (issue 18: skips on unseen code).

A Function whose argument is a key into a registry the project fills (a precomputed plan, a
cache) cannot get inputs from synthesis, and no module-level wrapper builds them: zero
configuration skipped it. The project's tests (and docstring examples) show the call with real
values; they are run with ``apply`` recorded, and the first call's arguments are the input set.
The reduced project here is written anew; a planted wrong backward reached the same way FAILs.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

OPS = '''
import torch

_REGISTRY = {}


class Plan:
    """A transform the project builds once and registers under a key."""

    def __init__(self, n, order):
        if order not in (2, 3):
            raise ValueError("order must be 2 or 3")
        self.order = order
        self.matrix = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))[0]
        self.key = f"plan-{n}-{order}"
        _REGISTRY[self.key] = self


class Transform(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, key):
        plan = _REGISTRY[key]
        ctx.plan = plan
        ctx.save_for_backward(x)
        return (x @ plan.matrix) ** plan.order

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.plan
        return (p.order * (x @ p.matrix) ** (p.order - 1) * g) @ p.matrix.T, None


class TransformWrong(torch.autograd.Function):
    """The transpose dropped: right only for a symmetric matrix."""

    @staticmethod
    def forward(ctx, x, key):
        plan = _REGISTRY[key]
        ctx.plan = plan
        ctx.save_for_backward(x)
        return (x @ plan.matrix) ** plan.order

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.plan
        return (p.order * (x @ p.matrix) ** (p.order - 1) * g) @ p.matrix, None


class Documented(torch.autograd.Function):
    """Called as in the example below.

    >>> plan = Plan(3, 2)
    >>> x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    >>> y = Documented.apply(x, plan.key)
    """

    @staticmethod
    def forward(ctx, x, key):
        plan = _REGISTRY[key]
        ctx.plan = plan
        ctx.save_for_backward(x)
        return (x @ plan.matrix) ** plan.order

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.plan
        return (p.order * (x @ p.matrix) ** (p.order - 1) * g) @ p.matrix.T, None


class Untested(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, key):
        return x * _REGISTRY[key].order

    @staticmethod
    def backward(ctx, g):
        return g, None
'''

TESTS = '''
import unittest

import pytest
import torch

from {pkg}.ops import Plan, Transform, TransformWrong, Untested

torch.set_default_dtype(torch.float64)  # a test module changing global state at import


@pytest.mark.parametrize("order", [3, 2])
def test_transform(order):
    with open("notes.txt", "w") as f:  # a relative write: never the user's file
        f.write("written by a test")
    plan = Plan(4, order)
    x = torch.randn(5, 4, requires_grad=True)
    assert Transform.apply(x, plan.key).shape == (5, 4)


class WrongCase(unittest.TestCase):
    def setUp(self):
        self.plan = Plan(4, 3)

    def test_wrong(self):
        x = torch.randn(5, 4, requires_grad=True)
        TransformWrong.apply(x, self.plan.key).sum().backward()


def test_untested_needs_a_fixture(monkeypatch):
    Untested.apply(torch.randn(3), Plan(3, 2).key)


def test_untested_catches_one_stop():
    try:
        while True:
            pass
    except:  # noqa: E722 - a bare except catches the first stop; the next one ends it
        pass
    while True:
        pass
    Untested.apply(torch.randn(3), "never")


def test_untested_forever():
    while True:  # stopped by the example's deadline, never reaching apply
        pass
    Untested.apply(torch.randn(3), "never")
'''


SCRIPT = '''
import torch

from {pkg}.ops import Plan, Untested


def test(n):
    return Untested.apply(torch.randn(n), Plan(n, 2).key)


for n in (10, 100):  # a timing script named like a test module: never imported
    open("{marker}", "w").write("imported")
    test(n)
'''


@pytest.fixture
def project(tmp_path, monkeypatch, request):
    pkg = f"pe_{request.node.name.replace('[', '_').replace(']', '')}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "ops.py").write_text(OPS)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ops.py").write_text(TESTS.format(pkg=pkg))
    (tmp_path / "tests" / "timing_test.py").write_text(SCRIPT.format(
        pkg=pkg, marker=tmp_path / "script_ran"))
    (tmp_path / "notes.txt").write_text("the user's notes")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, pkg
    for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
        del sys.modules[name]


def _rows(root, pkg) -> dict:
    result = run_check([Source("file", str(root / pkg / "ops.py"), f"{pkg}/ops.py")],
                       isolate=False)
    return {r["name"].split("::")[1]: r for r in result.rows}


def test_the_reference_the_fixtures_rest_on():
    """Independent of gradsmith: autograd of the plain expression, on an orthogonal matrix."""
    namespace: dict = {}
    exec(textwrap.dedent(OPS), namespace)  # noqa: S102 - the module text above
    plan = namespace["Plan"](4, 3)
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    (want,) = torch.autograd.grad(((x @ plan.matrix) ** 3).sum(), x)
    (right,) = torch.autograd.grad(namespace["Transform"].apply(x, plan.key).sum(), x)
    (wrong,) = torch.autograd.grad(namespace["TransformWrong"].apply(x, plan.key).sum(), x)
    assert torch.allclose(right, want) and not torch.allclose(wrong, want)


def test_tests_and_docstrings_give_inputs_and_a_verdict(project):
    root, pkg = project
    dtype = torch.get_default_dtype()
    rows = _rows(root, pkg)
    assert rows["Transform"]["verdict"] == "pass"
    assert "as `test_transform` in tests/test_ops.py passes them" in rows["Transform"]["inputs"]
    assert rows["TransformWrong"]["verdict"] == "fail"  # through a unittest.TestCase's setUp
    assert "gradient-mismatch" in {f["code"] for f in rows["TransformWrong"]["report"]["findings"]
                                   if f["severity"] == "error"}
    assert "`WrongCase.test_wrong`" in rows["TransformWrong"]["inputs"]
    assert rows["Documented"]["verdict"] == "pass"
    assert "docstring example of `Documented`" in rows["Documented"]["inputs"]
    # the test module's set_default_dtype and its sys.path entries did not leak
    assert torch.get_default_dtype() == dtype
    assert not [m for m in sys.modules if m.startswith("_gradsmith_example_")]
    assert (root / "notes.txt").read_text() == "the user's notes"  # ran in a scratch folder


def test_fixture_tests_and_scripts_are_not_run_and_looping_tests_are_stopped(project):
    root, pkg = project
    row = _rows(root, pkg)["Untested"]
    assert row["verdict"] == "skip"
    assert "examples and tests that reach it were run too: 2 gave no inputs" in row["reason"]
    assert not (root / "script_ran").exists()


def test_a_test_importing_the_file_by_its_folder_path_shares_its_registry(tmp_path, monkeypatch,
                                                                         request):
    """``models/layers.py`` without ``__init__.py``: gradsmith imports the file by path, the
    test as ``models.layers``; the test must reach the same module (its registry), not a copy."""
    folder = f"pe_models_{request.node.name[-8:]}"
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "layers.py").write_text(OPS)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_layers.py").write_text(TESTS.format(pkg=folder).replace(
        f"{folder}.ops", f"{folder}.layers"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_check([Source("file", str(tmp_path / folder / "layers.py"),
                               f"{folder}/layers.py")], isolate=False)
    rows = {r["name"].split("::")[1]: r for r in result.rows}
    assert rows["Transform"]["verdict"] == "pass"
    assert "in tests/test_layers.py passes them" in rows["Transform"]["inputs"]
    assert rows["TransformWrong"]["verdict"] == "fail"
    assert f"{folder}.layers" not in sys.modules  # the alias lived only while tests ran
