"""GS215 reaches kernels behind module helpers (issue 19, corpus 5 misses): a function a C
library binds into its module at import time, a function a helper returns, and a helper
module the large-tree pre-filter skipped. Each is shown at run time with a stand-in for the
compiled code: the second derivative silently loses a term, and @once_differentiable makes
it raise instead."""

from __future__ import annotations

import ast
import importlib
import shutil
import sys
import types

import pytest
import torch

from gradsmith.linter import _engine, lint
from gradsmith.linter._registered import registers_itself
from gradsmith.linter._source import parse
from gradsmith.linter._symbols import collect


def _gs215(root) -> list[tuple[str, int]]:
    return sorted((f.path.rsplit("/", 1)[-1], f.line) for f in lint(root, config=False)
                  if f.code == "GS215")


def _marked(path) -> list[tuple[str, int]]:
    return [(path.name, i) for i, line in enumerate(path.read_text().splitlines(), 1)
            if "# GS215" in line]


def _fresh_import(monkeypatch, root, names, module):
    monkeypatch.syspath_prepend(str(root))
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)  # removed again when the test ends
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module(module)


def _numpy(fn):
    """A stand-in for compiled code: computes on numpy, so autograd records nothing."""
    def run(*tensors):
        return torch.from_numpy(fn(*(t.detach().numpy() for t in tensors)))
    return run


def test_function_bound_at_import_time_by_a_registrar_is_a_kernel(
    fixtures_dir, tmp_path, monkeypatch
):
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "registered", root)
    ops_path = root / "regpkg" / "ops.py"
    # Scale only: ScaleOnce is @once_differentiable; Gate goes through Scale.apply
    assert _gs215(root) == _marked(ops_path)

    registry = _fresh_import(monkeypatch, root, ["regpkg", "regpkg._registry"],
                             "regpkg._registry")
    registry.LIBRARY.update(
        _CAPI_ScaleForward=_numpy(lambda x, w: x * w),
        _CAPI_ScaleBackward=_numpy(lambda x, w, g: w * g),
        _CAPI_BuildIndex=lambda n: torch.arange(n),
    )
    ops = _fresh_import(monkeypatch, root, ["regpkg._ops", "regpkg.ops"], "regpkg.ops")

    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, 2.0, -1.0], dtype=torch.float64)
    (g,) = torch.autograd.grad((ops.Scale.apply(x, w) ** 2).sum(), x, create_graph=True)
    (ref,) = torch.autograd.grad(((x * w) ** 2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # first derivative right: 2 w^2 x
    assert g.grad_fn is None  # no graph: the gradient penalty's term is lost
    ((g ** 2).sum() + (x ** 2).sum()).backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())
    (ref2,) = torch.autograd.grad((ref ** 2).sum() + (x ** 2).sum(), x)
    torch.testing.assert_close(ref2, 8 * w ** 4 * x.detach() + 2 * x.detach())  # by hand
    (g,) = torch.autograd.grad((ops.ScaleOnce.apply(x, w) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        (g ** 2).sum().backward()  # the fix: it raises instead


def test_a_module_hands_itself_to_a_registrar_only_by_its_own_name():
    def registers(text: str, module: str = "pkg.ops") -> bool:
        return registers_itself(collect(parse(text, "ops.py", module)))

    assert registers("init_api('lib.sparse', __name__)\n")
    assert registers("import sys\nbind(sys.modules[__name__])\n")
    assert registers("bind(globals())\n")
    assert registers("bind('pkg.ops')\n")
    assert not registers("import logging\nlog = logging.getLogger(__name__)\n")
    assert not registers("bind('other.ops')\n")
    assert not registers("def f():\n    bind(__name__)\n")  # not at import time


def test_function_a_helper_returns_is_followed_into_its_kernel(
    fixtures_dir, tmp_path, monkeypatch
):
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "returned", root)
    ops_path = root / "retpkg" / "ops.py"
    # Picked (a local), Ring (through a helper), Loaded (a tuple item); Reference is torch
    assert _gs215(root) == _marked(ops_path)

    fast = types.ModuleType("fastattn")
    fast.square_fwd = _numpy(lambda q: q * q)
    fast.square_bwd = _numpy(lambda q, g: 2 * q * g)
    monkeypatch.setitem(sys.modules, "fastattn", fast)
    ops = _fresh_import(monkeypatch, root, ["retpkg", "retpkg.kernels", "retpkg.ops"],
                        "retpkg.ops")

    q = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (ref,) = torch.autograd.grad((q ** 4).sum(), q, create_graph=True)  # 4 q^3
    (ref2,) = torch.autograd.grad(ref.sum(), q)
    torch.testing.assert_close(ref2, 12 * q.detach() ** 2)  # by hand
    for run in (lambda: ops.Picked.apply(q, "fast"), lambda: ops.Ring.apply(q, "fast"),
                lambda: ops.Loaded.apply(q)):
        (g,) = torch.autograd.grad((run() ** 2).sum(), q, create_graph=True)
        torch.testing.assert_close(g, ref.detach())  # first derivative right
        assert g.grad_fn is None  # the second derivative is silently missing
    (g,) = torch.autograd.grad((ops.Reference.apply(q) ** 2).sum(), q, create_graph=True)
    (g2,) = torch.autograd.grad(g.sum(), q)  # the torch backend differentiates twice
    torch.testing.assert_close(g2, ref2)


def test_large_tree_prefilter_still_parses_the_helper_module_backward_calls_into(
    fixtures_dir, tmp_path, monkeypatch
):
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "registered", root)
    monkeypatch.setattr(_engine, "LARGE_TREE_BYTES", 100)  # the pre-filter is on
    raws = _engine.iter_files([root])
    now, later = _engine._prefilter(raws)
    assert [r.module for r in later if r.module == "regpkg._ops"] == ["regpkg._ops"]
    assert _gs215(root) == _marked(root / "regpkg" / "ops.py")


def test_helper_pull_is_one_level_and_needs_a_sign_of_a_kernel(tmp_path, monkeypatch):
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "plain.py").write_text("def twice(g):\n    return g * 2\n")
    (root / "pkg" / "fn.py").write_text(
        "import torch\nfrom pkg.plain import twice\n\n\nclass F(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return twice(g)\n")
    monkeypatch.setattr(_engine, "LARGE_TREE_BYTES", 10)
    raws = _engine.iter_files([root])
    now, later = _engine._prefilter(raws)
    from gradsmith.linter._discovery import Index

    index = Index([parse(r.data.decode(), r.path, r.module, r.is_package) for r in now])
    functions = index.discover()
    assert [fc.name for fc in functions] == ["F"]
    assert _engine._helper_modules(later, functions, index) == []  # torch code only
    assert ast.parse((root / "pkg" / "plain.py").read_text())


def test_large_tree_parses_the_module_of_a_helper_backward_calls_for_its_effect(
    tmp_path, monkeypatch
):
    """aimet's quantize-only backward is one call, `log_with_error_and_assert_if_false(False,
    ...)`, of a helper in another module: GS109 reads the helper (it always raises) only when
    the pre-filter of a large tree lets that module be parsed."""
    root = tmp_path / "tree"
    (root / "qpkg").mkdir(parents=True)
    (root / "qpkg" / "__init__.py").write_text("")
    (root / "qpkg" / "utils.py").write_text(
        "def log_and_assert(cond, msg):\n    if not cond:\n        print(msg)\n"
        "    assert cond, msg\n")
    (root / "qpkg" / "ops.py").write_text(
        "import torch\n\nfrom qpkg.utils import log_and_assert\n\n\n"
        "class QuantizeOnly(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return torch.round(x)\n\n    @staticmethod\n"
        "    def backward(ctx, g):\n        log_and_assert(False, 'backward not implemented')\n")
    assert [f.code for f in lint(root, config=False)] == []  # small tree: all parsed
    monkeypatch.setattr(_engine, "LARGE_TREE_BYTES", 10)
    assert [f.code for f in lint(root, config=False)] == []  # the pre-filter keeps utils.py

    mod = _fresh_import(monkeypatch, root, ["qpkg", "qpkg.utils", "qpkg.ops"], "qpkg.ops")
    x = torch.tensor([0.4, 1.6], requires_grad=True)
    with pytest.raises(AssertionError, match="backward not implemented"):
        mod.QuantizeOnly.apply(x).sum().backward()  # raises on purpose, never returns None
