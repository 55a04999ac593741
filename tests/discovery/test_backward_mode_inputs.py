"""A mode that only backward compares, through ctx, is synthesised as each of its words
(issue 18, corpus 10b held-out: a feedback-alignment hook).

Reduced cases, written here: forward stores ``mode`` on ctx and returns its input; backward
reads ``mode = ctx.in1`` and, for ``mode == 'DFA'``, replaces the gradient with a projected
error (an estimator). Forward never compares ``mode``, so synthesis gave it the float 0.5,
the branch never ran and the hook PASSed. Now the words backward compares are the mode's
options: the first set takes the first, the variants the others.
"""

from __future__ import annotations

import torch
from source_cases import check_rows, error_codes, load_source, write

from gradsmith.discovery import Synthesized, synthesize

HOOK = '''
import torch
from torch.autograd import Function


class Hook(Function):
    """Direct feedback alignment: the DFA branch sends a projected error, not the gradient."""

    @staticmethod
    def forward(ctx, x, e, fb, mode):
        ctx.save_for_backward(x, e, fb)
        ctx.in1 = mode
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        x, e, fb = ctx.saved_tensors
        mode = ctx.in1
        if mode == 'DFA':
            g = e.mm(fb.view(-1, x.shape[-1]))
        return g, None, None, None
'''

MODES = '''
import torch
from torch.autograd import Function


class Square(Function):
    """x * x; backward computes the same gradient two ways, chosen by mode, only there."""

    @staticmethod
    def forward(ctx, x, mode):
        ctx.save_for_backward(x)
        ctx.mode = mode
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.mode == 'fused':
            return 2 * x * g, None
        elif ctx.mode in ('split', 'twice'):
            return g * x + x * g, None
        raise ValueError(f'unknown mode {ctx.mode}')


class SquareWrongWhenFused(Function):
    """x * x; the fused branch of backward is off by half (3x instead of 2x)."""

    @staticmethod
    def forward(ctx, x, mode):
        ctx.save_for_backward(x)
        ctx.mode = mode
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        mode = ctx.mode
        if mode != 'fused':
            return 2 * x * g, None
        return 3 * x * g, None


class SquareWrongOnCode2(Function):
    """x * x with an integer code; code 2's branch is wrong (x instead of 2x)."""

    @staticmethod
    def forward(ctx, x, code):
        ctx.save_for_backward(x)
        ctx.code = code
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.code == 1:
            return 2 * x * g, None
        if ctx.code == 2:
            return x * g, None
        return 2 * x * g, None
'''


def _reference_square(x):
    y = x.detach().clone().requires_grad_()
    (ref,) = torch.autograd.grad((y * y).sum(), y)
    return ref


def test_a_mode_compared_only_in_backward_takes_its_word(tmp_path):
    write(tmp_path / "hook_case.py", HOOK)
    module = load_source(tmp_path / "hook_case.py", "hook_case")
    found = synthesize(module.Hook)
    assert isinstance(found, Synthesized), found
    assert found.args[3] == "DFA", found.description


def test_the_hook_fails_on_its_dfa_set(tmp_path):
    rows = check_rows(tmp_path / "hook_rows.py", HOOK)
    row = rows["Hook"]
    assert row["verdict"] == "fail", row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert errors and "mode='DFA'" in row["inputs"].split("; also:")[0], row["inputs"]
    assert "undeclared-estimator" in error_codes(row), row["text"]
    # Independent reference: on the DFA set the hook's gradient is the projected error, not
    # the identity's gradient (ones) that autograd of x.clone() gives.
    module = load_source(tmp_path / "hook_rows.py", "hook_rows_case")
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    e, fb = torch.randn(3, 2, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(module.Hook.apply(x, e, fb, "DFA").sum(), x)
    assert not torch.allclose(got, torch.ones_like(x))
    torch.testing.assert_close(got, e.mm(fb))


def test_a_correct_backward_mode_passes_on_every_word_and_wrong_branches_fail(tmp_path):
    rows = check_rows(tmp_path / "mode_rows.py", MODES)
    square = rows["Square"]
    assert square["verdict"] == "pass", square["text"]
    module = load_source(tmp_path / "mode_rows.py", "mode_rows_case")
    found = synthesize(module.Square)
    assert isinstance(found, Synthesized), found
    tried = {found.args[1], *(v.args[1] for v in found.variants)}
    assert {"fused", "split"} <= tried, tried
    for mode in ("fused", "split", "twice"):  # independent reference: autograd of x * x
        x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        (got,) = torch.autograd.grad(module.Square.apply(x, mode).sum(), x)
        torch.testing.assert_close(got, _reference_square(x))
    for name, bad in (("SquareWrongWhenFused", "'fused'"), ("SquareWrongOnCode2", "code=2")):
        row = rows[name]
        assert row["verdict"] == "fail", row["text"]
        assert "gradient-mismatch" in error_codes(row), row["text"]
        errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
        # the failing set is named: the first set ("synthesised: ...") or a variant
        where = [f["details"].get("inputs") or row["inputs"].split("; also:")[0]
                 for f in errors]
        assert any(bad in w for w in where), where
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.SquareWrongWhenFused.apply(x, "fused").sum(), x)
    assert not torch.allclose(got, _reference_square(x))
    (got,) = torch.autograd.grad(module.SquareWrongOnCode2.apply(x, 2).sum(), x)
    assert not torch.allclose(got, _reference_square(x))


SETUP = '''
import torch
from torch.autograd import Function


class ScaleWrongWhenHalf(Function):
    """x * 2 in the modern style; backward's 'half' branch returns g (the gradient is 2g)."""

    @staticmethod
    def forward(x, how):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, how = inputs
        ctx.how = how

    @staticmethod
    def backward(ctx, g):
        how = ctx.how
        return (g if how in ('half', 'halved') else 2 * g), None
'''


def test_a_mode_setup_context_keeps_on_ctx_is_read_too(tmp_path):
    rows = check_rows(tmp_path / "setup_rows.py", SETUP)
    row = rows["ScaleWrongWhenHalf"]
    assert row["verdict"] == "fail", row["text"]
    assert "gradient-mismatch" in error_codes(row), row["text"]
    assert "how='half'" in row["inputs"].split("; also:")[0], row["inputs"]
    # Independent reference: autograd of x * 2 against the Function's gradient at 'half'.
    module = load_source(tmp_path / "setup_rows.py", "setup_rows_case")
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.ScaleWrongWhenHalf.apply(x, "half").sum(), x)
    (ref,) = torch.autograd.grad((x * 2).sum(), x)
    assert not torch.allclose(got, ref)
