"""A filter bank's filters are (1, 1, taps), shorter than the signal (issue 18's dev half:
pytorch_wavelets' synthesis filter banks were skipped, no layout fitted them, so a backward
that is the adjoint of zero padding only, wrong for the other padding modes, went unchecked).
Reduced case, written here: zero-config inputs find the layout, and the mode selector's other
value exposes the wrong boundary gradient."""

import torch
import torch.nn.functional as F
from torch.autograd import Function

import gradsmith
from gradsmith.checkrun.sets import merge as _merge
from gradsmith.checkrun.sets import variant_checks as _variant_checks
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _filter_bank(mode_aware: bool):
    class FilterBank(Function):
        """Per-channel causal filtering, padding by zeros (mode 0) or circularly (mode 1)."""

        @staticmethod
        def forward(ctx, lo, g, mode):
            channels, taps = lo.shape[1], g.shape[-1]
            if g.shape != (1, 1, taps) or taps >= lo.shape[-1]:
                raise ValueError("g must be (1, 1, taps), shorter than the signal")
            if mode == 0:  # an integer code, as pytorch_wavelets' int_to_mode
                padding = "constant"
            elif mode == 1:
                padding = "circular"
            else:
                raise ValueError(f"unknown mode {mode}")
            ctx.save_for_backward(g)
            ctx.mode, ctx.channels = mode, channels
            padded = F.pad(lo, (taps - 1, 0), mode=padding)
            return F.conv1d(padded, g.expand(channels, 1, taps), groups=channels)

        @staticmethod
        def backward(ctx, dy):
            (g,) = ctx.saved_tensors
            taps = g.shape[-1]
            full = F.conv_transpose1d(dy, g.expand(ctx.channels, 1, taps), groups=ctx.channels)
            dlo = full[..., taps - 1:]
            if mode_aware and ctx.mode == 1:  # the wrapped-around part goes to the end
                dlo = dlo.clone()
                dlo[..., -(taps - 1):] += full[..., :taps - 1]
            return dlo, None, None

    return FilterBank


def _zero_config(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(fn, *found.args)
    for index, variant in enumerate(found.variants, start=1):
        _merge(report, index, variant.change,
               gradsmith.check(fn, *variant.args, checks=_variant_checks({})))
    return found, report


def test_filters_get_a_filter_layout_and_a_correct_bank_passes():
    bank = _filter_bank(mode_aware=True)
    found, report = _zero_config(bank)
    lo, g, mode = found.args
    assert tuple(g.shape[:2]) == (1, 1) and g.shape[-1] < lo.shape[-1]
    assert f"mode={1 - mode}" in [v.change for v in found.variants]  # both modes checked
    assert report.passed, report
    # the reference: autograd of the same filtering in plain PyTorch, circular mode
    x = lo.detach().clone().requires_grad_(True)
    taps = g.shape[-1]
    want = F.conv1d(F.pad(x, (taps - 1, 0), mode="circular"),
                    g.expand(x.shape[1], 1, taps), groups=x.shape[1])
    dy = torch.randn_like(want)
    (expected,) = torch.autograd.grad(want, x, dy)
    x2 = lo.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(bank.apply(x2, g, 1), x2, dy)
    torch.testing.assert_close(got, expected)


def test_a_zero_padding_adjoint_is_caught_in_the_other_mode():
    found, report = _zero_config(_filter_bank(mode_aware=False))
    errors = [f for f in report.findings if f.severity == "error"]
    assert errors and {f.code for f in errors} == {"gradient-mismatch"}
    first = found.args[2]  # the findings come from the set in mode 1
    assert all(f.details.get("inputs", f"mode={first}") == "mode=1" for f in errors)
