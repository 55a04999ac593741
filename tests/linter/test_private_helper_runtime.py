"""GS215 and GS221 through a private static helper (``Fn.__backward``) that launches a kernel
defined as a class's static method and re-exported by a star import (fixtures/privkern, laid
out as Triton kernel libraries are). At run time, in Triton's interpreter on CPU: the
gradient is wrong when grad_output arrives transposed or expanded, and a second derivative is
silently missing (no graph) instead of raising, which is what the two warnings claim; the
guarded variant gets both right. Gradients are compared with autograd of ``x * 2``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint
from gradsmith.linter._kernels import stored_params

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
    end = lines.index("class DoubleTracked(torch.autograd.Function):")
    assert not [f for f in lint(OPS.parent, config=False) if start <= f.line <= end]


def _kernel(path: Path, klass: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    owner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == klass)
    return next(n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_kernel_stores_through_pointers_not_their_scalar_offsets():
    """`tl.store(y_ptr + row * n + offs, ...)` with `n: tl.int32` writes y, not n; the shape,
    strides and offsets of a block pointer are not written either."""
    stats = _kernel(FIXTURES / "privkern" / "kernel" / "stats.py", "Stats", "forward")
    assert set(stored_params(stats)) == {0, 2}  # y_ptr, running_ptr
    block = ast.parse(
        "@triton.jit\ndef k(out, inp, rows, cols: tl.int32, B: tl.constexpr):\n"
        "    p = tl.make_block_ptr(out, shape=(rows, cols), strides=(cols, 1),\n"
        "                          offsets=(0, 0), block_shape=(B, B), order=(1, 0))\n"
        "    tl.store(p, tl.load(inp))\n").body[0]
    assert set(stored_params(block)) == {0}


def test_running_state_is_not_gs101_a_differentiated_input_is(ops):
    """`forward(ctx, *args)` unpacking `x, running_mean, momentum = args`: the kernel's
    in-place update of running_mean, whose gradient backward always gives as None, is
    BatchNorm's idiom; the same write into an input backward differentiates is GS101."""
    lines = OPS.read_text().splitlines()
    found = [(f.line, f.severity) for f in lint(OPS.parent, config=False) if f.code == "GS101"]
    scaled = lines.index("class DoubleScaled(torch.autograd.Function):")
    assert found == [(next(i for i in range(scaled, len(lines))
                           if "kernel.Stats.forward[" in lines[i]) + 1, "error")]
    x = _x()
    running, scale = torch.zeros(3), torch.ones(3)
    y = ops.DoubleTracked.apply(x, running, 0.5)
    torch.testing.assert_close(running, x.detach().mean(-1) * 0.5)  # the update it is for
    torch.testing.assert_close(torch.autograd.grad(y.sum(), x)[0], torch.full((3, 4), 2.0))
    before = scale.clone()
    ops.DoubleScaled.apply(x, scale)
    assert not torch.equal(scale, before), "the caller's differentiated input kept its value"
