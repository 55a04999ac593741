"""The severities of fixtures/heldout5.py hold at run time (lint corpus 5's held-out half,
issue 19): each error fails under torch, each class lint now only warns about (or leaves
silent) runs and computes the right gradient.

The fixture is loaded as a module here; gradients are compared with autograd of the same
expression in plain torch.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "heldout5.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "heldout5_fixture")


@pytest.fixture(scope="module")
def findings():
    """Findings on the fixture, by (line, code)."""
    return {(f.line, f.code) for f in lint(FIXTURE, config=False)}


def _line_of(text: str) -> int:
    """Line number of the fixture line containing ``text`` (exactly one)."""
    lines = [i for i, line in enumerate(FIXTURE.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


@pytest.mark.parametrize("call", ["scale_sync_bound", "scale_sync_by_name",
                                  "scale_sync_setup_gap"])
def test_apply_keywords_that_bind_run_and_are_not_reported(mod, findings, call):
    x = torch.randn(3, dtype=torch.double, requires_grad=True)
    (gx,) = torch.autograd.grad(getattr(mod, call)(x).sum(), x)
    (ref,) = torch.autograd.grad((x * 2.0 * 3.0).sum(), x)
    torch.testing.assert_close(gx, ref)
    line = _line_of(f"def {call}(") + 1
    assert (line, "GS112") not in findings


@pytest.mark.parametrize(("call", "match"), [
    ("scale_sync_gap", "missing required argument"),
    ("scale_sync_unknown", "unexpected keyword"),
    ("scale_sync_twice", "multiple values"),
])
def test_apply_keywords_that_do_not_bind_raise_and_are_errors(mod, findings, call, match):
    with pytest.raises(TypeError, match=match):
        getattr(mod, call)(torch.randn(3, requires_grad=True))
    assert (_line_of(f"def {call}(") + 1, "GS112") in findings


def test_detach_of_results_computed_from_detached_copies_is_harmless(mod, findings):
    torch.manual_seed(0)
    a = torch.randn(4, dtype=torch.double, requires_grad=True)
    b = a * 3  # a non-leaf input: its history must survive the call
    y = mod.Recompute.apply(torch.sin, b)
    assert b.grad_fn is not None and b.requires_grad
    (ga,) = torch.autograd.grad((y + b).sum(), a)
    (ref,) = torch.autograd.grad((torch.sin(a * 3) + a * 3).sum(), a)
    torch.testing.assert_close(ga, ref)
    assert not any(code == "GS101" and _line_of("element.detach_()") == line
                   for line, code in findings)


def test_detach_of_an_input_cuts_the_callers_graph_and_stays_an_error(mod, findings):
    a = torch.randn(4, dtype=torch.double, requires_grad=True)
    b = a * 3
    y = mod.DetachesInput.apply(b)
    assert b.grad_fn is None and not b.requires_grad  # the caller's tensor lost its history
    (ga,) = torch.autograd.grad((y + b).sum(), a)
    (ref,) = torch.autograd.grad((a * 3 * 2 + a * 3).sum(), a)
    assert not torch.allclose(ga, ref)  # b's own path to `a` is silently missing
    leaf = torch.randn(4, requires_grad=True)
    mod.DetachesInput.apply(leaf)
    assert not leaf.requires_grad  # a parameter passed in would stop training
    assert (_line_of("x.detach_()"), "GS101") in findings


@pytest.mark.parametrize(("name", "error"), [("QuantizeOnly", AssertionError),
                                             ("QuantizeOnlyRaise", NotImplementedError)])
def test_backward_raising_through_a_helper_always_raises_and_is_not_gs109(
        mod, findings, name, error):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(error):
        mod.__dict__[name].apply(x).sum().backward()
    line = _line_of(f"class {name}(")
    assert not any(code == "GS109" and line < at < line + 12 for at, code in findings)


def test_backward_falling_through_a_passing_helper_loses_the_gradient_and_is_gs109(
        mod, findings):
    x = torch.randn(3, requires_grad=True)
    (gx,) = torch.autograd.grad(mod.QuantizeChecked.apply(x).sum(), x, allow_unused=True)
    assert gx is None  # backward returned nothing: the gradient is silently missing
    assert (_line_of("def backward(ctx, g):  # GS109"), "GS109") in findings


def _survives(fn, differentiate: bool) -> bool:
    """Whether fn's output is still alive after ``del`` with the cycle collector off."""
    gc.collect()
    gc.disable()
    try:
        x = torch.randn(4, requires_grad=True)
        out = fn(x)
        if differentiate:
            out.sum().backward()
        ref = weakref.ref(out)
        del out
        return ref() is not None
    finally:
        gc.enable()
        gc.collect()


def test_output_popped_by_backward_is_freed_after_backward_and_only_warned(mod, findings):
    assert not _survives(mod.KeptAndPopped.apply, differentiate=True)
    assert _survives(mod.KeptAndPopped.apply, differentiate=False)  # why it stays a warning
    line = _line_of("ctx.outputs = [outputs]  # GS234")
    assert (line, "GS234") in findings and (line, "GS104") not in findings
    x = torch.randn(4, dtype=torch.double, requires_grad=True)
    (gx,) = torch.autograd.grad(mod.KeptAndPopped.apply(x).sum(), x)
    torch.testing.assert_close(gx, x.detach().exp())


def test_output_kept_past_backward_leaks_and_stays_an_error(mod, findings):
    assert _survives(mod.KeptForever.apply, differentiate=True)
    assert (_line_of("ctx.outputs = [outputs]  # GS104"), "GS104") in findings


@pytest.mark.parametrize(("name", "args", "error"), [
    ("DeletesState", (2.0,), AttributeError),
    ("DeletesStateByName", (), AttributeError),
    ("PopsInputs", (2.0,), IndexError),
    ("KeptAndPopped", (), IndexError),
    ("DeletesStateInBranch", (2.0,), AttributeError),
])
def test_backward_consuming_ctx_state_fails_a_second_backward_and_is_warned(
        mod, findings, name, args, error):
    x = torch.randn(3, dtype=torch.double, requires_grad=True)
    y = mod.__dict__[name].apply(x, *args).sum()
    (first,) = torch.autograd.grad(y, x, retain_graph=True)
    (ref,) = torch.autograd.grad(_reference(name, x, args).sum(), x)
    torch.testing.assert_close(first, ref)  # the first backward is right
    with pytest.raises(error):
        torch.autograd.grad(y, x)
    line = _line_of(f"class {name}(")
    assert any(code == "GS235" and line < at < line + 20 for at, code in findings)


def _reference(name: str, x, args):
    if name == "KeptAndPopped":
        return x.exp()
    return x * (args[0] if args else 3.0)


def test_backward_guarding_its_consumed_state_raises_a_clear_error_and_is_silent(
        mod, findings):
    x = torch.randn(3, requires_grad=True)
    y = mod.DeletesStateGuarded.apply(x, 2.0).sum()
    torch.autograd.grad(y, x, retain_graph=True)
    with pytest.raises(RuntimeError, match="more than once"):
        torch.autograd.grad(y, x)
    line = _line_of("class DeletesStateGuarded(")
    assert not any(code == "GS235" and line < at < line + 20 for at, code in findings)
