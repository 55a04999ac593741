"""GS215 through a lazy extension loader (issue 19): a helper returns an object whose
``__getattr__`` reads a property returning ``cpp_extension.load(...)``, and backward picks
the kernel per device into a local. Shown at run time with a stand-in for the compiled
module: the second derivative silently loses a term."""

from __future__ import annotations

import importlib
import shutil
import sys
import types

import pytest
import torch
from torch.utils import cpp_extension

from gradsmith.linter import lint

_PACKAGE = "extension_proxy"


def _gs215(root) -> list[tuple[str, int]]:
    return [(f.path.rsplit("/", 1)[-1], f.line) for f in lint(root, config=False)
            if f.code == "GS215"]


def _kernel_line(path) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "# GS215" in line)


def test_lazy_loader_extension_is_found_in_backward_and_double_backward_is_silently_wrong(
    fixtures_dir, tmp_path, monkeypatch
):
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / _PACKAGE, root)
    ops_path = root / "proxpkg" / "ops.py"
    # Scale only: ScaleOnce is @once_differentiable, Settled's __getattr__ reads a dict
    assert _gs215(root) == [("ops.py", _kernel_line(ops_path))]

    built = []

    def load(name, sources, *args, **kwargs):  # what the compiled module does: no graph
        built.append(name)

        def backward(x, w, g):
            x_, w_, g_ = (t.detach().numpy() for t in (x, w, g))
            return torch.from_numpy(w_ * g_), torch.from_numpy(x_ * g_)

        return types.SimpleNamespace(scale_forward=lambda x, w: x.detach() * w.detach(),
                                     scale_backward_cpu=backward, scale_backward_cuda=backward)

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.syspath_prepend(str(root))
    for name in ("proxpkg", "proxpkg.utils", "proxpkg.utils.loader", "proxpkg.ops"):
        monkeypatch.setitem(sys.modules, name, None)  # removed again when the test ends
        monkeypatch.delitem(sys.modules, name)
    ops = importlib.import_module("proxpkg.ops")
    assert built == []  # compiled at the first attribute read, not at import

    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, 2.0, -1.0], dtype=torch.float64)
    (g,) = torch.autograd.grad((ops.Scale.apply(x, w) ** 2).sum(), x, create_graph=True)
    assert built == ["scale"]
    (ref,) = torch.autograd.grad(((x * w) ** 2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # first derivative right: 2 w^2 x
    assert g.grad_fn is None  # no graph: the second derivative has nothing to follow
    ((g ** 2).sum() + (x ** 2).sum()).backward()  # a gradient penalty next to another term
    torch.testing.assert_close(x.grad, 2 * x.detach())  # the penalty's term silently lost
    (ref2,) = torch.autograd.grad((ref ** 2).sum() + (x ** 2).sum(), x)
    torch.testing.assert_close(ref2, 8 * w ** 4 * x.detach() + 2 * x.detach())  # by hand
    (g,) = torch.autograd.grad((ops.ScaleOnce.apply(x, w) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        (g ** 2).sum().backward()  # the fix: it raises instead


def test_getattr_forwarding_to_something_else_is_not_an_extension(tmp_path):
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "fns.py").write_text(
        "import torch\n\n\nclass Table:\n    def __init__(self):\n        self.data = {}\n\n"
        "    def __getattr__(self, key):\n        return self.data[key]\n\n"
        "    def load(self):\n        return torch.load('t.pt')\n\n\n"
        "t = Table()\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x * t.scale\n\n    @staticmethod\n"
        "    def backward(ctx, g):\n        return t.scale_backward(g)\n")
    assert _gs215(root) == []


def test_forward_backward_pair_of_an_outside_package_is_a_kernel_and_double_backward_is_lost(
    fixtures_dir, tmp_path, monkeypatch
):
    path = fixtures_dir / "kernel_pairs.py"
    marked = [i for i, line in enumerate(path.read_text().splitlines(), 1) if "# GS215" in line]
    assert _gs215(path) == [("kernel_pairs.py", line) for line in marked]  # Conv and Gat

    def fastconv_fwd(u, k):  # a compiled kernel: no autograd graph
        return torch.from_numpy(u.detach().numpy() * k.detach().numpy())

    def fastconv_bwd(dout, u, k):
        d, u_, k_ = (t.detach().numpy() for t in (dout, u, k))
        return torch.from_numpy(d * k_), torch.from_numpy(d * u_)

    stand_in = types.ModuleType("fastconv")
    stand_in.fastconv_fwd, stand_in.fastconv_bwd = fastconv_fwd, fastconv_bwd
    helper = types.ModuleType("helperlib")
    helper.scale_bwd = lambda g: 2 * g
    gat = types.ModuleType("fastgat")  # the module form: `fastgat.gat_backward(...)`
    gat.gat_forward = fastconv_fwd
    gat.gat_backward = fastconv_bwd
    other = types.ModuleType("otherlib")
    other.norm_backward = lambda g: 3 * g
    monkeypatch.setitem(sys.modules, "fastconv", stand_in)
    monkeypatch.setitem(sys.modules, "helperlib", helper)
    monkeypatch.setitem(sys.modules, "fastgat", gat)
    monkeypatch.setitem(sys.modules, "otherlib", other)
    python_module = types.ModuleType("precision")  # a Python module: not a kernel pair
    python_module.AddOneInPlace = None
    monkeypatch.setitem(sys.modules, "precision", python_module)
    shutil.copy(path, tmp_path / "gs_kernel_pairs.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "gs_kernel_pairs", None)
    monkeypatch.delitem(sys.modules, "gs_kernel_pairs")
    mod = importlib.import_module("gs_kernel_pairs")

    u = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    k = torch.tensor([0.5, 2.0, -1.0], dtype=torch.float64)
    (g,) = torch.autograd.grad((mod.Conv.apply(u, k) ** 2).sum(), u, create_graph=True)
    (ref,) = torch.autograd.grad(((u * k) ** 2).sum(), u, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # first derivative right: 2 k^2 u
    assert g.grad_fn is None  # the second derivative (2 k^2) is silently missing
    (g,) = torch.autograd.grad((mod.ConvOnce.apply(u, k) ** 2).sum(), u, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()  # the fix: it raises instead
    (g,) = torch.autograd.grad((mod.Gat.apply(u, k) ** 2).sum(), u, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # the module form: same kernel, same loss
    assert g.grad_fn is None
