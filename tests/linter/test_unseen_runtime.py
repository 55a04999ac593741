"""The severities of fixtures/unseen_code.py hold at run time: what lint calls an error fails
under torch, what it leaves silent (or warns about) computes the right gradient.

The fixture is loaded as a module here (it is only linted elsewhere); gradients are compared
with autograd of the same expression written in plain torch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "unseen_code.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "unseen_code_fixture")


@pytest.fixture(scope="module")
def findings():
    return {(f.line, f.code): f for f in lint(FIXTURE, config=False)}


def _line(text: str) -> int:
    return FIXTURE.read_text().splitlines().index(text) + 1


def _pair():
    torch.manual_seed(0)
    return (torch.randn(3, dtype=torch.double, requires_grad=True),
            torch.randn(3, dtype=torch.double, requires_grad=True))


def test_plain_def_backward_runs_correctly_and_is_only_a_warning(mod, findings):
    a, b = _pair()
    assert torch.autograd.gradcheck(mod.PlainDefBackward.apply, (a, b))
    compiled = torch.compile(lambda x, y: mod.PlainDefBackward.apply(x, y).sum(), backend="eager")
    (ga, gb) = torch.autograd.grad(compiled(a, b), (a, b))
    ra, rb = torch.autograd.grad((a.exp() * b).sum(), (a, b))
    torch.testing.assert_close((ga, gb), (ra, rb))
    (finding,) = [f for (_, code), f in findings.items() if code == "GS113"]
    assert finding.severity == "warning"


def test_fallthrough_only_when_no_grad_is_needed_is_silent_and_correct(mod, findings):
    x, w = _pair()
    gx, gw = torch.autograd.grad(mod.GradOnlyWhenNeeded.apply(x, w).sum(), (x, w))
    rx, rw = torch.autograd.grad((x.exp() * w).sum(), (x, w))
    torch.testing.assert_close((gx, gw), (rx, rw))
    start = _line("class GradOnlyWhenNeeded(Function):")
    assert not [k for k in findings if k[1] == "GS109" and start < k[0] < start + 12]


def test_fallthrough_when_one_input_needs_grad_fails_as_reported(mod, findings):
    x, w = _pair()
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        mod.FirstOnly.apply(x.detach(), w).sum().backward()
    assert findings[(_line("    def backward(ctx, g):  # GS109"), "GS109")].severity == "error"


def test_same_mode_chain_in_forward_and_backward_is_silent(mod, monkeypatch, findings):
    monkeypatch.setitem(os.environ, "MODE", "b")
    x, _ = _pair()
    (g,) = torch.autograd.grad(mod.ModeChain.apply(x).sum(), (x,))
    torch.testing.assert_close(g, torch.full_like(x, 3.0))
    monkeypatch.setitem(os.environ, "MODE", "c")
    assert mod.ModeChain.apply(x) is None  # no output: backward can never run
    assert not [k for k in findings if k[1] == "GS109" and k[0] < _line("class FirstOnly(Function):")]


def test_apply_count_errors_raise_type_error(mod, findings):
    x, _ = _pair()
    for args in ((x,), (x, 2.0, 3.0)):
        with pytest.raises(TypeError):
            mod.Scale.apply(*args)
    with pytest.raises(TypeError):  # three arguments beside the `*`, forward takes 3
        mod.offload_too_many()
    with pytest.raises(TypeError):
        mod.offload_too_many(x)
    assert [f.severity for (_, c), f in findings.items() if c == "GS121"] == ["error"] * 3


def test_spreading_a_sequence_forward_takes_whole_fails_with_two_inputs(mod, findings):
    x, w = _pair()
    (gx,) = torch.autograd.grad(mod.offload(x).sum(), x)  # one input: forward gets it alone
    (rx,) = torch.autograd.grad((x * 2.0).sum(), x)
    torch.testing.assert_close(gx, rx)
    with pytest.raises(TypeError, match="takes 4 positional arguments but 5 were given"):
        mod.offload(x, w)
    line = _line("    return Offload.apply(*inputs, dummy, 2.0)  # GS224")
    assert findings[(line, "GS224")].severity == "warning"


def test_forward_none_ctx_under_no_grad_matches_apply(mod, findings):
    x, _ = _pair()
    torch.testing.assert_close(mod.evaluate(x), mod.Shift.apply(x, 2.0).detach())
    with pytest.raises(AttributeError):  # the GS111 line: forward stores on ctx
        mod.Scale.forward(None, x.detach(), 2.0)
    assert findings[(_line("    broken = Scale.forward(None, x.detach(), 2.0)  # GS111"),
                     "GS111")].severity == "error"


def test_star_args_gradient_count_error_is_real(mod, findings):
    x, w = _pair()
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        mod.StarInputs.apply(x, w, w).sum().backward()
    gx, gw = torch.autograd.grad(mod.StarInputsRight.apply(x, w, w).sum(), (x, w))
    rx, rw = torch.autograd.grad((x * (w + w)).sum(), (x, w))
    torch.testing.assert_close((gx, gw), (rx, rw))
    gx = torch.autograd.grad(mod.StarInputsPadded.apply(x, 1.0, 2.0).sum(), (x,))[0]
    torch.testing.assert_close(gx, torch.full_like(x, 2.0))
    assert [c for (_, c) in findings if c == "GS108"] == ["GS108"]


def test_conditional_save_warning_is_a_real_failure_when_weight_needs_no_grad(mod):
    x, w = _pair()
    with pytest.raises((ValueError, RuntimeError)):
        mod.SavedWhenWeightNeedsGrad.apply(x, w.detach()).sum().backward()
    gx, gw = torch.autograd.grad(mod.SavedWhenAnyNeedsGrad.apply(x, w).sum(), (x, w))
    torch.testing.assert_close((gx, gw), (w.detach(), x.detach()))


def test_list_slot_rebinding_leaves_grad_output_untouched(mod):
    x, y = _pair()
    gx, gy = torch.autograd.grad(mod.ListSlot2.apply(x, y), (x, y),
                                 (torch.ones(3, dtype=torch.double), torch.ones(3, dtype=torch.double)))
    torch.testing.assert_close((gx, gy), (torch.full_like(x, 2.0), torch.full_like(y, 2.0)))


def test_helper_marking_dirty_makes_the_inplace_change_legal(mod):
    base = torch.randn(3, dtype=torch.double, requires_grad=True)
    x = base * 1.0
    out = mod.HelperDirty.apply(x)
    (g,) = torch.autograd.grad(out.sum(), (base,))
    torch.testing.assert_close(g, torch.full_like(base, 2.0))


def test_unsqueeze_on_a_local_view_keeps_the_input_shape(mod):
    x = torch.randn(3, dtype=torch.double)
    mod.LocalView.apply(x)
    assert x.shape == (3,)


def test_gradient_left_out_when_the_filter_needs_one_is_silently_missing(mod, findings):
    x, f = _pair()
    out = mod.TimeConv.apply(x, f)
    out.sum().backward()
    assert f.grad is None  # a filter that requires grad is never trained
    torch.testing.assert_close(x.grad, f.sum().expand(3).detach())
    gx, gf = torch.autograd.grad(mod.TimeConvDone.apply(x, f).sum(), (x, f))
    rx, rf = torch.autograd.grad((x * f.sum()).sum(), (x, f))
    torch.testing.assert_close((gx, gf), (rx, rf))
    (line,) = [n for (n, code) in findings if code == "GS226"]
    assert line == _line("            grad_filter = None  # GS226")
    assert findings[(line, "GS226")].severity == "warning"
