"""Lint corpus 9's harmless dev errors, reduced (fixtures/dev9_harmless.py, CPU): what the
linter now says about each class matches what torch does with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "dev9_harmless.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "dev9_harmless_fixture")


@pytest.fixture(scope="module")
def found():
    return {(f.line, f.code) for f in lint(FIXTURE, config=False)}


def _line(text: str) -> int:
    return FIXTURE.read_text().splitlines().index(text) + 1


def test_legacy_function_with_state_cannot_run_so_no_cycle_is_reported(mod, found):
    """Neither way of calling the legacy Function runs on the pinned torch: GS126 (an
    error) at the class, no GS113 beside it, and its `self.out = out` keeps nothing alive:
    no GS104."""
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="[Ll]egacy autograd function"):
        mod.LegacyState(2.0)(x)
    with pytest.raises(AttributeError, match="k"):
        mod.LegacyState.apply(x)
    stored = _line("        self.out = out")
    assert (stored, "GS104") not in found and (stored, "GS234") not in found
    assert (_line("class LegacyState(torch.autograd.Function):  # GS126"), "GS126") in found
    assert not {code for line, code in found if code == "GS113"
                and _line("class LegacyState(torch.autograd.Function):  # GS126") < line
                < _line("class StaticWithInit(torch.autograd.Function):")}


def test_init_beside_static_methods_runs_and_is_not_legacy(mod, found):
    """Near miss: `__init__` next to static methods taking ctx; apply runs and the gradient
    is k times the incoming one."""
    x = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(mod.StaticWithInit.apply(x, 3.0).sum(), x)
    torch.testing.assert_close(got, torch.full_like(x, 3.0))
    assert [line for line, code in found if code == "GS126"] == [
        _line("class LegacyState(torch.autograd.Function):  # GS126")]


def test_plain_non_static_forward_keeps_its_output_on_ctx(mod, found):
    """Near miss: without `__init__` the plain forward runs through apply, the gradient is
    exp's, and the graph node holds the output: the cycle GS104 reports."""
    x = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
    y = mod.PlainNonStatic.apply(x)
    assert y.grad_fn.out is y
    (got,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(got, torch.exp(x.detach()))
    assert (_line("        ctx.out = out  # GS104"), "GS104") in found


def test_joined_integer_outputs_never_reach_backward(mod, found):
    """cat of an annotated IntTensor input and an int32 tensor is int32: it cannot require
    grad, so the short backward never runs (GS229, a warning)."""
    xyz = torch.randn(4, 3, requires_grad=True)
    first = torch.arange(4, dtype=torch.int32)
    out = mod.JoinedIndices.apply(0.5, 2, xyz, first)
    assert out.dtype == torch.int32 and not out.requires_grad
    line = _line("        return None, None, None  # GS229")
    assert (line, "GS229") in found and (line, "GS108") not in found


def test_joined_with_a_float_input_raises_in_backward(mod, found):
    """Near miss: a float `first` promotes the cat to float; the count error is real."""
    xyz = torch.randn(4, 3)
    first = torch.randn(4, requires_grad=True)
    out = mod.JoinedWithFloat.apply(0.5, 2, xyz, first)
    assert out.dtype == torch.float32 and out.requires_grad
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        out.sum().backward()
    assert (_line("        return None, None, None  # GS108"), "GS108") in found
