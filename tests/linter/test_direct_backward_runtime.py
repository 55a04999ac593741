"""GS111 for `Fn.backward(...)` called directly (issue 19): a unit test of the gradient
formula with a None ctx backward never reads, or a ctx of its own, computes what autograd
computes through apply, so it is not reported; a None ctx that backward reads raises
AttributeError and leaving ctx out raises TypeError, both errors. Checked by running it."""

from __future__ import annotations

import pytest
import torch

from gradsmith.linter import lint


def _line(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_backward_called_alone_runs_unless_ctx_is_read_as_none_or_left_out(fixtures_dir,
                                                                            load_fixture):
    path = fixtures_dir / "direct_backward_ctx.py"
    found = sorted((f.line, f.code, f.severity) for f in lint(path, config=False)
                   if f.code in ("GS111", "GS214"))
    assert found == [
        (_line(path, "return Scaled.backward(None, g)"), "GS111", "error"),
        (_line(path, "return Reduce.backward(g)"), "GS111", "error"),
    ]
    mod = load_fixture(path, "gs_direct_backward_ctx")
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    g = torch.randn(4)
    via_apply = torch.autograd.grad(mod.Reduce.apply(x), x, g)[0]
    reference = torch.autograd.grad(x.sum(0), x, g)[0]  # autograd of the same expression
    torch.testing.assert_close(mod.formula_alone(g), reference)
    torch.testing.assert_close(via_apply, reference)
    gx, gscale = mod.formula_with_a_ctx(g)
    torch.testing.assert_close(gx, torch.autograd.grad((x * 3.0).sum(0), x, g)[0][0])
    assert gscale is None
    with pytest.raises(AttributeError, match="scale"):
        mod.none_ctx_read(g)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        mod.ctx_left_out(g)
