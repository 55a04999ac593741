"""fixtures/grad_layout.py at run time (CPU): an extension call that backward follows with
``ctx.mark_dirty(grad)`` changes the caller's gradient tensor (GS102), and ``assert
g.is_contiguous()`` raises for the expanded gradient of ``out.sum()`` (GS221); references:
the gradient tensor as passed (a clone), and autograd of ``x * 2``."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "grad_layout.py"


@pytest.fixture(scope="module")
def mod():
    ext = types.ModuleType("rotate_ext")
    ext.rotate = lambda t, sign: t.copy_(t.roll(1, -1) * sign)  # writes its argument, as a kernel
    saved = sys.modules.get("rotate_ext")
    sys.modules["rotate_ext"] = ext
    try:
        spec = importlib.util.spec_from_file_location("grad_layout_fixture", FIXTURE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        if saved is None:
            sys.modules.pop("rotate_ext", None)
        else:
            sys.modules["rotate_ext"] = saved


def _found():
    lines = FIXTURE.read_text().splitlines()
    owner, owners = None, {}
    for number, line in enumerate(lines, 1):
        if line.startswith("class "):
            owner = line.split()[1].split("(")[0]
        owners[number] = owner
    return {(owners[f.line], f.code, f.severity) for f in lint(FIXTURE, config=False)}


def test_extension_write_announced_by_mark_dirty_changes_the_callers_gradient(mod):
    x = torch.randn(2, 4, requires_grad=True)
    g = torch.arange(8.0).reshape(2, 4)
    before = g.clone()
    torch.autograd.grad(mod.Rotate.apply(x), x, grad_outputs=g)
    assert not torch.equal(g, before), "the caller's gradient kept its values"
    assert ("Rotate", "GS102", "warning") in _found()


def test_asserting_a_contiguous_gradient_fails_for_a_summed_output(mod):
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(AssertionError):
        mod.Scale.apply(x).sum().backward()
    got = torch.autograd.grad(mod.ScaleGuarded.apply(x).sum(), x)[0]
    torch.testing.assert_close(got, torch.autograd.grad((x * 2).sum(), x)[0])
    found = _found()
    assert ("Scale", "GS221", "warning") in found
    assert not {c for n, c, _ in found if n == "ScaleGuarded"}
