"""GS111 vs GS214 for `Fn.forward(...)` called directly (issue 19): with a ctx of its own (a
stand-in object, the class) the call runs as written, so it is no error; without one, every
argument shifts and the call raises, an error. Checked by running the fixture."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from gradsmith.linter import lint


def _load(path):
    spec = importlib.util.spec_from_file_location("gs_direct_forward_ctx", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _line(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_forward_with_its_own_ctx_runs_and_forward_without_ctx_raises(fixtures_dir):
    path = fixtures_dir / "direct_forward_ctx.py"
    found = sorted((f.line, f.code, f.severity) for f in lint(path, config=False)
                   if f.code in ("GS111", "GS214"))
    assert found == [
        (_line(path, "return Exchange.forward(ctx,"), "GS214", "warning"),
        (_line(path, "Debuggable.forward(Debuggable,"), "GS214", "warning"),
        (_line(path, "return Exchange.forward(a, b)"), "GS111", "error"),
    ]  # the call under torch.no_grad() is not reported
    mod = _load(path)
    received_a, received_b = mod.forward_alone()  # runs as written: a test of forward alone
    torch.testing.assert_close(received_a, torch.ones(2))
    torch.testing.assert_close(received_b, torch.zeros(2))
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = mod.scaled(x, debug=True)  # the debug path runs too, with the class as ctx
    torch.testing.assert_close(y, x.detach() * 2.0)
    assert mod.Debuggable.saved[0] is x
    assert type(y.grad_fn).__name__ == "MulBackward0"  # GS214: the custom backward is bypassed
    assert "Debuggable" in type(mod.scaled(x).grad_fn).__name__  # via apply it is used
    a, b = torch.zeros(2), torch.ones(2)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        mod.forgot_ctx(a, b)  # GS111: ctx left out, every argument shifts by one
