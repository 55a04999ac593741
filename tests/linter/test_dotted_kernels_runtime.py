"""A backward reaching a kernel through a package attribute chain (``from . import kern``,
then ``kern.ops.scale(g, out=buf)``; issue 19, lint corpus 6 misses): the large-tree
pre-filter parses the module the chain spells, and a Python helper's keyword argument
fills the parameter it names, so writing through ``out=`` is an in-place edit. Both are
shown at run time: the second derivative is silently missing, and a second backward
raises because the saved buffer was overwritten."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import _engine, lint

FIXTURES = Path(__file__).parent / "fixtures"


def _codes(root) -> list[tuple[str, int, str]]:
    return sorted((f.path.rsplit("/", 1)[-1], f.line, f.code)
                  for f in lint(root, config=False))


def _marked(path) -> list[tuple[str, int, str]]:
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if "#" in line:
            out += [(path.name, number, c) for c in line.split("#", 1)[1].split()
                    if c.startswith("GS")]
    return sorted(out)


@pytest.fixture(scope="module")
def fn_module():
    """The fixture package, imported once (its custom op registers a global name)."""
    root = str(FIXTURES / "dotted_kernels")
    sys.path.insert(0, root)
    try:
        yield importlib.import_module("dkpkg.fn")
    finally:
        sys.path.remove(root)
        for name in [n for n in sys.modules if n == "dkpkg" or n.startswith("dkpkg.")]:
            del sys.modules[name]


def test_large_tree_prefilter_parses_the_module_a_dotted_call_spells(
    fixtures_dir, tmp_path, monkeypatch
):
    root = tmp_path / "tree"
    shutil.copytree(fixtures_dir / "dotted_kernels", root)
    monkeypatch.setattr(_engine, "LARGE_TREE_BYTES", 10)  # the pre-filter is on
    now, later = _engine._prefilter(_engine.iter_files([root]))
    assert "dkpkg.kern.ops" in {r.module for r in later}  # not parsed up front
    assert _codes(root) == _marked(root / "dkpkg" / "fn.py")


def test_kernel_behind_the_chain_loses_the_second_derivative(fn_module):
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad((fn_module.Scale.apply(x) ** 2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, 18 * x.detach())  # d/dx (3x)^2 = 18x, by hand
    assert g.grad_fn is None  # the second derivative (18) is silently missing


def test_out_keyword_overwrites_the_saved_buffer_and_a_second_backward_raises(fn_module):
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = fn_module.ScaleReuse.apply(x)
    y.backward(torch.ones(2), retain_graph=True)
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(torch.ones(2))


def test_out_keyword_chosen_by_an_option_stays_the_option_warning(tmp_path):
    """`out=x if inplace else None` is the caller's option (GS217), never GS101 as well."""
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef rot(x, out=None):\n    y = out if out is not None else "
        "torch.empty_like(x)\n    y.copy_(x.flip(-1))\n    return y\n\n\n"
        "class Rot(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x, inplace=False):\n"
        "        return rot(x, out=x if inplace else None)\n\n    @staticmethod\n"
        "    def backward(ctx, g):\n        return g.flip(-1), None\n")
    assert [f.code for f in lint(tmp_path, config=False)] == ["GS217"]
