"""Inputs from the project's tests of its public API, several calls above the Function.

An internal kernel is called only through the public API (``api.apply_engine`` -> a method of
``Engine`` -> ``backend.transform`` -> ``Kernel.apply``), and the tests of that API build their
objects with pytest fixtures from a ``conftest.py`` (a yield fixture, a parametrized one, one
reading a command-line option's default). Zero configuration skipped such a Function; now the
tests reaching it are found by following callers, ranked and run with their fixtures built. The
reduced project is written anew; a planted wrong backward reached the same way (through a
module-level alias of its ``apply``) must FAIL, and a test needing ``monkeypatch`` is not run.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source
from gradsmith.discovery.fixtures import Resolver, definitions
from gradsmith.discovery.ranked_tests import ranked
from gradsmith.discovery.reach import reach

KERNELS = '''
import torch

REGISTRY = {}


class Plan:
    def __init__(self, n):
        self.matrix = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))[0]
        self.key = f"plan-{n}-{len(REGISTRY)}"
        REGISTRY[self.key] = self


class Kernel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, key):
        m = REGISTRY[key].matrix.to(x.dtype)
        ctx.save_for_backward(x, m)
        return torch.sin(x @ m)

    @staticmethod
    def backward(ctx, g):
        x, m = ctx.saved_tensors
        return (g * torch.cos(x @ m)) @ m.T, None


class KernelWrong(torch.autograd.Function):
    """The transpose dropped: wrong for any matrix that is not symmetric."""

    @staticmethod
    def forward(ctx, x, key):
        m = REGISTRY[key].matrix.to(x.dtype)
        ctx.save_for_backward(x, m)
        return torch.sin(x @ m)

    @staticmethod
    def backward(ctx, g):
        x, m = ctx.saved_tensors
        return (g * torch.cos(x @ m)) @ m, None


class KernelHidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, key):
        return x * REGISTRY[key].matrix.sum()

    @staticmethod
    def backward(ctx, g):
        return g, None  # wrong, but only a test needing monkeypatch reaches it
'''

BACKEND = '''
from {pkg}.kernels import Kernel, KernelHidden, KernelWrong

wrong_kernel = KernelWrong.apply


def transform(x, key):
    return Kernel.apply(x, key)


def transform_wrong(x, key):
    return wrong_kernel(x, key)


def transform_hidden(x, key):
    return KernelHidden.apply(x, key)
'''

API = '''
from {pkg} import backend
from {pkg}.kernels import Plan


class Engine:
    def __init__(self, n):
        self.n = n
        self.plan = Plan(n)

    def run_transform(self, x):
        return backend.transform(x, self.plan.key)

    def run_wrong(self, x):
        return backend.transform_wrong(x, self.plan.key)

    def run_hidden(self, x):
        return backend.transform_hidden(x, self.plan.key)


def apply_engine(engine, x):
    return engine.run_transform(x)
'''

CONFTEST = '''
import pytest
import torch

from {pkg}.api import Engine


def pytest_addoption(parser):
    parser.addoption("--size", type=int, default=4, help="matrix size")


@pytest.fixture
def size(request):
    return request.config.getoption("--size")


@pytest.fixture
def engine(size, request):
    if request.node.get_closest_marker("gpu_only"):
        pytest.skip("no GPU")
    made = Engine(size)
    yield made
    with open("teardown.txt", "w") as f:  # a relative write: the scratch folder's
        f.write("finished")


@pytest.fixture(params=[torch.float64, torch.float32])
def dtype(request):
    return request.param
'''

TESTS = '''
import pytest
import torch

from {pkg} import api


def test_engine_transform(engine, dtype, tmp_path):
    x = torch.randn(5, engine.n, dtype=dtype, requires_grad=True)
    y = api.apply_engine(engine, x)
    assert y.dtype == dtype and tmp_path.is_dir()


class TestWrong:
    @pytest.fixture
    def batch(self):
        return 3

    @pytest.mark.parametrize("scale", [2.0, 0.5])
    def test_wrong(self, engine, batch, scale):
        engine.run_wrong(scale * torch.randn(batch, engine.n, dtype=torch.float64))


def test_hidden(engine, monkeypatch):
    engine.run_hidden(torch.randn(3, engine.n, dtype=torch.float64))
'''


@pytest.fixture
def project(tmp_path, monkeypatch, request):
    pkg = f"ptr_{request.node.name[-12:].replace('[', '_').replace(']', '')}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    for name, text in (("kernels", KERNELS), ("backend", BACKEND), ("api", API)):
        (tmp_path / pkg / f"{name}.py").write_text(text.replace("{pkg}", pkg))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST.replace("{pkg}", pkg))
    (tmp_path / "tests" / "test_api.py").write_text(TESTS.replace("{pkg}", pkg))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, pkg
    for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
        del sys.modules[name]


def test_the_reference_the_cases_rest_on():
    """Independent of gradsmith: autograd of the plain expression on an orthogonal matrix."""
    namespace: dict = {}
    exec(textwrap.dedent(KERNELS), namespace)  # noqa: S102 - the module text above
    plan = namespace["Plan"](4)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (want,) = torch.autograd.grad(torch.sin(x @ plan.matrix).sum(), x)
    (right,) = torch.autograd.grad(namespace["Kernel"].apply(x, plan.key).sum(), x)
    (wrong,) = torch.autograd.grad(namespace["KernelWrong"].apply(x, plan.key).sum(), x)
    assert torch.allclose(right, want) and not torch.allclose(wrong, want)


def test_tests_of_the_public_api_give_the_kernel_its_inputs(project):
    root, pkg = project
    result = run_check([Source("file", str(root / pkg / "kernels.py"), f"{pkg}/kernels.py")],
                       isolate=False)
    rows = {r["name"].split("::")[1]: r for r in result.rows}
    right, wrong, hidden = rows["Kernel"], rows["KernelWrong"], rows["KernelHidden"]
    assert right["verdict"] == "pass", right
    assert "`test_engine_transform` in tests/test_api.py" in right["inputs"]
    # the planted wrong backward, reached through a class's fixture and an alias of apply
    assert wrong["verdict"] == "fail"
    assert "gradient-mismatch" in {f["code"] for f in wrong["report"]["findings"]
                                   if f["severity"] == "error"}
    assert "`TestWrong.test_wrong`" in wrong["inputs"]
    assert hidden["verdict"] == "skip"  # its only test needs monkeypatch: never run
    assert not (root / "teardown.txt").exists()  # the yield fixture finished in scratch
    assert not [m for m in sys.modules if m.startswith("_gradsmith_example_")]


def test_names_reach_the_kernel_through_methods_and_aliases(tmp_path):
    (tmp_path / "kernels.py").write_text(KERNELS)
    for name, text in (("backend", BACKEND), ("api", API)):
        (tmp_path / f"{name}.py").write_text(text.replace("{pkg}", "p"))
    depth = reach({"Kernel"}, tmp_path)
    assert depth["Kernel"] == 0 and depth["transform"] == 1
    assert depth["run_transform"] == 2 and depth["apply_engine"] == 3
    assert reach({"KernelWrong"}, tmp_path)["wrong_kernel"] == 0 + 1  # the alias
    assert "Engine" not in depth  # constructing an Engine does not call the kernel


def test_tests_named_after_the_function_run_first(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_matmul.py").write_text(textwrap.dedent('''
        from lib import Tensor

        def test_size():
            Tensor().size()

        def test_sp_dense_mm(a):
            Tensor() @ a

        def test_dense_sp_mm(a):
            a @ Tensor()
        '''))
    depth = {"FixedDenseSpMM": 0, "dense_sp_mm": 1, "Tensor": 2}
    order = [c.name for c in ranked([tmp_path], depth, {"FixedDenseSpMM", "dense_sp_mm"})]
    assert order == ["test_dense_sp_mm", "test_sp_dense_mm", "test_size"]


def test_fixtures_resolve_like_pytest(tmp_path, monkeypatch):
    namespace: dict = {}
    monkeypatch.chdir(tmp_path)
    exec(textwrap.dedent('''
        import pytest

        @pytest.fixture(params=[pytest.param(7, id="seven"), 8])
        def n(request):
            return request.param

        @pytest.fixture
        def seed(request):
            return request.config.getoption("--seed")

        @pytest.fixture
        def pair(n, seed):
            yield (n, seed)
            open("closed", "w").close()

        @pytest.fixture
        def needs_pytest(capsys):
            return 1
        '''), namespace)  # noqa: S102 - fixtures written here

    def test(pair, tmp_path):
        return pair, tmp_path

    resolver = Resolver(definitions(namespace), {"--seed": 3, "seed": 3})
    kwargs = resolver.kwargs(test, {})
    assert kwargs["pair"] == (7, 3) and Path(kwargs["tmp_path"]).parent == tmp_path
    assert not (tmp_path / "closed").exists()
    resolver.close()
    assert (tmp_path / "closed").exists()  # the yield fixture's teardown ran, once

    def test_needs(needs_pytest):
        return needs_pytest

    from gradsmith.discovery.fixtures import Unresolved

    with pytest.raises(Unresolved):
        Resolver(definitions(namespace), {}).kwargs(test_needs, {})


BLOCKS = '''
import torch


class BlockDot(torch.autograd.Function):
    """C = A @ B on flat data, real or complex, mixed: forward promotes."""

    @staticmethod
    def forward(ctx, a, b, shapes):
        dtype = torch.promote_types(a.dtype, b.dtype)
        (m, k), (k2, n) = shapes
        ctx.save_for_backward(a.to(dtype), b.to(dtype))
        ctx.shapes = shapes
        return (a.to(dtype).view(m, k) @ b.to(dtype).view(k2, n)).reshape(-1)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        (m, k), (k2, n) = ctx.shapes
        g = g.view(m, n)
        ga = (g @ b.view(k2, n).conj().T).reshape(-1)  # complex even for a real a: autograd
        gb = (a.view(m, k).conj().T @ g).reshape(-1)  # rejects it
        return ga, gb, None


class Solve(torch.autograd.Function):
    """x = s * y with a helper object a (correct) backward frees after use."""

    @staticmethod
    def forward(ctx, y, helper):
        if not isinstance(helper, Helper):
            raise TypeError("helper must be a Helper")
        ctx.helper = helper
        return helper.apply_to(y)

    @staticmethod
    def backward(ctx, g):
        out = ctx.helper.apply_to(g)
        ctx.helper.release()
        return out, None


class Scaled(torch.autograd.Function):
    """x = s * y, with s read from a factor the caller built from it (correct backward)."""

    @staticmethod
    def forward(ctx, s, y, factor):
        if not isinstance(factor, Helper):
            raise TypeError("factor must be a Helper")
        ctx.save_for_backward(y)
        ctx.factor = factor
        return factor.apply_to(y)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (g * y).sum(), ctx.factor.apply_to(g), None


class Helper:
    def __init__(self, s):
        self.s = s

    def apply_to(self, y):
        return self.s * y

    def release(self):
        self.s = None
'''

BLOCK_TESTS = '''
import torch

from {pkg}.blocks import BlockDot, Helper, Scaled, Solve


def test_block_dot():
    a = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    BlockDot.apply(a, b, ((2, 3), (3, 2))).sum().backward()


def test_scaled():
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    Scaled.apply(s, torch.randn(4, dtype=torch.float64, requires_grad=True), Helper(s.detach()))


def test_solve():
    Solve.apply(torch.randn(4, dtype=torch.float64, requires_grad=True), Helper(2.0))
'''


def test_mixed_dtypes_a_forward_promotes_are_checked_and_a_used_up_object_skips(
        tmp_path, monkeypatch, request):
    pkg = f"ptr_blocks_{request.node.name[-6:]}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "blocks.py").write_text(BLOCKS)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_blocks.py").write_text(BLOCK_TESTS.replace("{pkg}", pkg))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # the reference: same-dtype operands are right; a real a with a complex b is rejected
    namespace: dict = {}
    exec(textwrap.dedent(BLOCKS), namespace)  # noqa: S102 - the module text above
    a = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.complex128, requires_grad=True)
    (want,) = torch.autograd.grad((a.view(2, 3) @ a.view(3, 2).detach()).sum(), a)
    (got,) = torch.autograd.grad(namespace["BlockDot"].apply(
        a, a.detach().clone(), ((2, 3), (3, 2))).sum(), a)
    assert torch.allclose(want, got)
    with pytest.raises(RuntimeError):
        namespace["BlockDot"].apply(a, b, ((2, 3), (3, 2))).abs().sum().backward()
    try:
        result = run_check([Source("file", str(tmp_path / pkg / "blocks.py"),
                                   f"{pkg}/blocks.py")], isolate=False)
    finally:
        for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
            del sys.modules[name]
    rows = {r["name"].split("::")[1]: r for r in result.rows}
    dot = rows["BlockDot"]
    assert dot["verdict"] == "fail", dot
    errors = [f for f in dot["report"]["findings"] if f["severity"] == "error"]
    assert errors and all("complex and the others real" in str(f["details"].get("example", ""))
                          or "complex and the others real" in f["message"]
                          or "(forward promotes" in str(f) for f in errors)
    assert rows["Solve"]["verdict"] == "skip"
    assert "used up" in rows["Solve"]["reason"]
    # forward never reads s (it travels inside the factor): no FAIL on finite differences of 0
    assert rows["Scaled"]["verdict"] == "skip"
    assert "forward never reads `s`" in rows["Scaled"]["reason"]
