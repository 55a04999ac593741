"""GS217 through an out-buffer (fixtures/option_buffers.py, CPU): with the `inplace` option
backward's extension writes the input gradient into grad_output itself, so the caller's
``grad_tensors`` is overwritten; the twin that writes a fresh buffer leaves it intact. Both
gradients match the rotation computed with plain torch. The extension is a Python stand-in
that, like the CUDA one, writes its last two tensor arguments."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "option_buffers.py"


def _apply_rotary(x1, x2, cos, sin, o1, o2, conj):
    s = -sin if conj else sin
    r1, r2 = x1 * cos - x2 * s, x1 * s + x2 * cos
    o1.copy_(r1)
    o2.copy_(r2)


@pytest.fixture(scope="module")
def mod(load_fixture):
    ext = types.ModuleType("rotary_stub_ext")
    ext.apply_rotary = _apply_rotary
    sys.modules["rotary_stub_ext"] = ext
    try:
        yield load_fixture(FIXTURE, "option_buffers_fixture")
    finally:
        del sys.modules["rotary_stub_ext"]


def _reference(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


@pytest.mark.parametrize("inplace", [False, True])
def test_inplace_option_overwrites_grad_output_and_only_it_is_reported(mod, inplace):
    torch.manual_seed(0)
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    angle = torch.randn(5, 2, dtype=torch.float64)
    cos, sin = angle.cos(), angle.sin()
    g = torch.randn(5, 4, dtype=torch.float64)
    kept = g.clone()
    out = mod.Rotate.apply(x, cos, sin, inplace)
    torch.testing.assert_close(out, _reference(x, cos, sin))
    (got,) = torch.autograd.grad(out, x, g)
    want = torch.autograd.grad(_reference(x, cos, sin), x, kept)[0]
    torch.testing.assert_close(got, want)
    assert torch.equal(g, kept) is not inplace  # the caller's gradient was overwritten
    g = kept.clone()  # the twin writes a fresh buffer: the same gradient, g intact
    (fresh,) = torch.autograd.grad(mod.RotateFresh.apply(x, cos, sin), x, g)
    torch.testing.assert_close(fresh, want)
    assert torch.equal(g, kept)
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)]
    line = next(n for n, t in enumerate(FIXTURE.read_text().splitlines(), 1)
                if t.endswith("# GS217"))
    assert found == [("GS217", "warning", line)]

