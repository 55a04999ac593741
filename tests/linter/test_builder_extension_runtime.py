"""GS215 through extension builders (issue 19, lint corpus 8): a linted class whose
``load()`` returns what ``cpp_extension.load`` built (through another method, inherited
from a base in another module), reached as ``Builder().load()`` at import time, under
``global`` in a function or a layer's ``__init__``, and from a folder without
``__init__.py`` inside the package by a relative import. Shown at run time with a stand-in
for the compiled module: second derivatives are silently lost; the ``@once_differentiable``
twin raises, and the near miss (a ``load()`` returning torch functions) is right."""

from __future__ import annotations

import importlib
import shutil
import sys
import types

import pytest
import torch
from torch.utils import cpp_extension

from gradsmith.linter import lint

_MODULES = ("bpkg", "bpkg.builder", "bpkg.builder.base", "bpkg.builder.scale", "bpkg.ops",
            "bpkg.layers", "bpkg.fused", "bpkg.fused.act")


def _marked(root) -> list[tuple[str, int]]:
    return sorted((p.relative_to(root).as_posix(), i) for p in root.rglob("*.py")
                  for i, line in enumerate(p.read_text().splitlines(), 1) if "# GS215" in line)


def test_builder_extensions_are_kernels_and_double_backward_is_silently_lost(
    fixtures_dir, tmp_path, monkeypatch
):
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "builder_ext", root)
    found = sorted((f.path.split("/tree/", 1)[1], f.line) for f in lint(root, config=False)
                   if f.code == "GS215")
    assert found == _marked(root)  # not ScaleOnce, not SettingsFn
    assert [p for p, _ in found] == ["bpkg/fused/act.py", "bpkg/layers.py", "bpkg/ops.py",
                                     "bpkg/ops.py"]

    built = []

    def load(name, sources, *args, **kwargs):  # what the compiled module does: no graph
        built.append(name)

        def backward(x, w, g):
            x_, w_, g_ = (t.detach().numpy() for t in (x, w, g))
            return torch.from_numpy(w_ * g_), torch.from_numpy(x_ * g_)

        return types.SimpleNamespace(scale_forward=lambda x, w: x.detach() * w.detach(),
                                     scale_backward=backward, scale_backward_half=backward)

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(root))
    for name in _MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # removed again when the test ends
        monkeypatch.delitem(sys.modules, name)
    ops = importlib.import_module("bpkg.ops")
    layers = importlib.import_module("bpkg.layers")
    act = importlib.import_module("bpkg.fused.act")
    ops.ScaleLayer(torch.ones(1))
    assert built == ["scale_ext", "scale_ext"]  # import time and the layer's __init__

    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, 2.0, -1.0], dtype=torch.float64)
    (ref,) = torch.autograd.grad(((x * w) ** 2).sum(), x, create_graph=True)
    (ref2,) = torch.autograd.grad((ref ** 2).sum(), x)
    torch.testing.assert_close(ref2, 8 * w ** 4 * x.detach())  # by hand: d/dx (2 w^2 x)^2
    for fn in (ops.Scale, ops.LayerScale, layers.ScaleLayerFn, act.FusedScale):
        (g,) = torch.autograd.grad((fn.apply(x, w) ** 2).sum(), x, create_graph=True)
        torch.testing.assert_close(g, ref.detach())  # first derivative right: 2 w^2 x
        assert g.grad_fn is None, fn  # no graph: a gradient penalty silently loses its term
    (g,) = torch.autograd.grad((ops.ScaleOnce.apply(x, w) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        (g ** 2).sum().backward()  # the fix: it raises instead
    (g,) = torch.autograd.grad((layers.SettingsFn.apply(x, w) ** 2).sum(), x,
                               create_graph=True)
    (g2,) = torch.autograd.grad((g ** 2).sum(), x)
    torch.testing.assert_close(g2, ref2)  # near miss: torch functions, right to second order
