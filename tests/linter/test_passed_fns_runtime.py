"""A function handed to ``Fn.apply`` and kept on ctx (``ctx.act_bwd = act_bwd``, called
``Fn.apply(x, w, square_forward, square_backward)``) is followed into backward's
``ctx.act_bwd(...)`` (issue 19, lint corpus 6: axolotl's LoRA MLP hands its activation's
Triton backward in): GS215 when it runs a kernel, GS227 when it writes a saved
intermediate. Both shown at run time against autograd of ``(x * w) ** 2``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import _engine, lint

ROOT = Path(__file__).parent / "fixtures" / "passed_fns"
MLP = ROOT / "pfpkg" / "mlp.py"


@pytest.fixture(scope="module")
def mlp():
    """The fixture package, imported once (its custom op registers a global name)."""
    sys.path.insert(0, str(ROOT))
    try:
        yield importlib.import_module("pfpkg.mlp")
    finally:
        sys.path.remove(str(ROOT))
        for name in [n for n in sys.modules if n == "pfpkg" or n.startswith("pfpkg.")]:
            del sys.modules[name]


def test_lint_follows_the_function_handed_to_apply():
    found = sorted((f.line, f.code) for f in lint(ROOT, config=False))
    marked = sorted((i, c) for i, text in enumerate(MLP.read_text().splitlines(), 1)
                    if "#" in text for c in text.split("#", 1)[1].split() if c.startswith("GS"))
    assert found == marked == [(19, "GS215"), (37, "GS215"), (37, "GS227")]


def test_large_tree_prefilter_parses_the_module_of_the_handed_function(monkeypatch):
    monkeypatch.setattr(_engine, "LARGE_TREE_BYTES", 10)  # the pre-filter is on
    now, later = _engine._prefilter(_engine.iter_files([ROOT]))
    assert "pfpkg.act" in {r.module for r in later}  # not parsed up front
    found = sorted((f.line, f.code) for f in lint(ROOT, config=False))
    assert found == [(19, "GS215"), (37, "GS215"), (37, "GS227")]


def _inputs():
    torch.manual_seed(0)
    return (torch.randn(4, dtype=torch.float64, requires_grad=True),
            torch.randn(4, dtype=torch.float64))


def test_handed_in_kernel_loses_the_second_derivative(mlp):
    x, w = _inputs()
    (ref,) = torch.autograd.grad(((x * w) ** 2).sum(), x, create_graph=True)
    (ref2,) = torch.autograd.grad(ref.sum(), x)
    torch.testing.assert_close(ref2, 2 * w * w)  # by hand
    (g,) = torch.autograd.grad(mlp.act_mul(x, w).sum(), x, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # the first derivative is right
    assert g.grad_fn is None  # the second is silently missing
    (g,) = torch.autograd.grad(mlp.plain_act_mul(x, w).sum(), x, create_graph=True)
    (g2,) = torch.autograd.grad(g.sum(), x)  # the near miss differentiates twice
    torch.testing.assert_close(g2, ref2)


def test_handed_in_kernel_overwrites_the_saved_pre_activation(mlp):
    x, w = _inputs()
    y = mlp.act_mul_saved(x, w)
    y.backward(torch.ones(4, dtype=torch.float64), retain_graph=True)
    torch.testing.assert_close(x.grad, 2 * x.detach() * w * w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(torch.ones(4, dtype=torch.float64))
