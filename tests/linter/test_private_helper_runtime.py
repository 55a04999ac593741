"""GS215 and GS221 through a private static helper (``Fn.__backward``) that launches a kernel
defined as a class's static method and re-exported by a star import (fixtures/privkern, laid
out as Triton kernel libraries are). At run time, in Triton's interpreter on CPU: the
gradient is wrong when grad_output arrives transposed or expanded, and a second derivative is
silently missing (no graph) instead of raising, which is what the two warnings claim; the
guarded variant gets both right. Gradients are compared with autograd of ``x * 2``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

pytest.importorskip("triton", reason="needs triton: pip install 'gradsmith[triton]'")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

FIXTURES = Path(__file__).parent / "fixtures"
OPS = FIXTURES / "privkern" / "ops.py"


@pytest.fixture(scope="module")
def ops():
    from gradsmith._triton import interpreting, prepare

    if not prepare() and not interpreting() and not torch.cuda.is_available():
        pytest.skip("Triton kernels cannot run here (no interpreter, no GPU)")
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(FIXTURES))
    try:
        yield importlib.import_module("privkern.ops")
    finally:
        mp.undo()


def _x():
    torch.manual_seed(0)
    return torch.randn(3, 4, requires_grad=True)


def _transposed_grad(fn):
    torch.manual_seed(1)
    w = torch.randn(4, 3)
    x = _x()
    return torch.autograd.grad((fn(x).t() * w).sum(), x)[0], torch.autograd.grad(
        ((x * 2).t() * w).sum(), x)[0]


@pytest.mark.parametrize("name", ["Double", "DoubleStarred"])
def test_helper_launch_on_raw_gradient_is_wrong_and_warned(ops, name):
    fn = getattr(ops, name).apply
    got, want = _transposed_grad(fn)
    assert not torch.allclose(got, want), "the dense kernel read the transposed gradient right"
    x = _x()
    first = torch.autograd.grad(fn(x), x, torch.ones(3, 4), create_graph=True)[0]
    assert first.grad_fn is None, "the kernel's gradient has a graph: double backward would work"
    lines = OPS.read_text().splitlines()
    start = lines.index(f"class {name}(torch.autograd.Function):")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("class ")),
               len(lines))
    call = next(i for i in range(start, end) if f"return {name}.__backward(" in lines[i]) + 1
    launch = next(i for i in range(call, end) if "kernel.Scale.backward[" in lines[i]) + 1
    found = {(f.code, f.line, f.severity) for f in lint(OPS.parent, config=False)
             if f.path.endswith("ops.py") and start < f.line <= end}
    # GS215 where backward calls the helper; GS221 where the helper launches on the raw gradient
    assert found == {("GS215", call, "warning"), ("GS221", launch, "warning")}

def test_guarded_helper_is_right_and_not_reported(ops):
    got, want = _transposed_grad(ops.DoubleGuarded.apply)
    torch.testing.assert_close(got, want)
    x = _x()
    first = torch.autograd.grad(ops.DoubleGuarded.apply(x), x, torch.ones(3, 4),
                                create_graph=True)[0]
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        torch.autograd.grad(first.sum(), x)
    lines = OPS.read_text().splitlines()
    start = lines.index("class DoubleGuarded(torch.autograd.Function):") + 1
    assert not [f for f in lint(OPS.parent, config=False) if f.line >= start]
