"""GS248 (fixtures/opaque_dtype.py, CPU): a wrong gradient count fails only when the
extension-filled output, of the callers' input dtype, is floating; a module stands in for
the compiled extension."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "opaque_dtype.py"


def _voxelize(coords, out, scale):
    """What the compiled kernel does: fill `out` in place, outside autograd."""
    out.resize_(coords.shape).copy_(coords.detach() // scale)


@pytest.fixture(scope="module")
def mod(load_fixture):
    ext = types.ModuleType("opaque_dtype_ext")
    ext._C = types.SimpleNamespace(voxelize=_voxelize)
    saved = sys.modules.get("opaque_dtype_ext")
    sys.modules["opaque_dtype_ext"] = ext
    try:
        yield load_fixture(FIXTURE, "opaque_dtype_fixture")
    finally:
        if saved is None:
            sys.modules.pop("opaque_dtype_ext", None)
        else:
            sys.modules["opaque_dtype_ext"] = saved


@pytest.fixture(scope="module")
def found():
    return {(f.line, f.code) for f in lint(FIXTURE, config=False)}


def _line(text: str) -> int:
    return FIXTURE.read_text().splitlines().index(text) + 1


def test_fixture_expectations(found, expected):
    want = {(line, code) for (_, line, code) in expected(FIXTURE)}
    assert want <= found
    assert {code for _, code in found} <= {"GS108", "GS248"}


def test_integer_input_never_reaches_the_short_backward(mod, found):
    coords = torch.tensor([[4, 7], [9, 2]])
    weight = torch.tensor([1.0, -2.0], requires_grad=True)
    out = mod.VoxelIndex.apply(coords, 2)
    assert out.dtype == torch.int64 and not out.requires_grad
    torch.testing.assert_close(out, torch.div(coords, 2, rounding_mode="floor"))  # by hand
    (out.float() * weight).sum().backward()  # the index feeds a loss: backward never runs
    torch.testing.assert_close(weight.grad, out.float().sum(0))
    index, flag = mod.VoxelPair.apply(coords, 2)
    assert not index.requires_grad and not flag.requires_grad
    assert (_line("        return None  # GS248"), "GS248") in found
    assert (_line("    def backward(ctx, g):  # GS248"), "GS248") in found


def test_float_input_that_requires_grad_makes_the_count_fail(mod, found):
    """The other side of the warning: the same code with float coordinates raises."""
    assert (_line("        return None  # GS248"), "GS108") not in found
    coords = torch.tensor([[4.0, 7.0], [9.0, 2.0]], requires_grad=True)
    out = mod.VoxelIndex.apply(coords, 2)
    assert out.dtype == torch.float32 and out.requires_grad
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        out.sum().backward()
    out, _ = mod.VoxelPair.apply(coords, 2)
    with pytest.raises(TypeError, match="positional argument"):
        out.sum().backward()


def test_shown_floating_or_gradient_returning_stays_an_error(mod, found):
    """Near misses: an output made float32, a backward returning a gradient, a caller
    passing `.float()`: the count fails on the code as written (GS108)."""
    ints = torch.tensor([[4, 7], [9, 2]])
    points = torch.tensor([[4.0, 7.0], [9.0, 2.0]], requires_grad=True)
    out = mod.VoxelFloat.apply(points, 2)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        out.sum().backward()
    out = mod.VoxelGrad.apply(points, 2)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        out.sum().backward()
    out = mod.voxel_called(ints)  # an integer tensor, made float by the call itself
    assert out.dtype == torch.float32
    for text in ("        return None  # GS108", "        return g / 2  # GS108"):
        assert (_line(text), "GS108") in found
