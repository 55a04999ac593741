"""Zero-config inputs for arguments only the launched kernels explain (our own kernels in
tests/triton/kernel_use_kernels.py): a class index the kernel compares with column offsets, a
last dimension the kernel splits in halves, an int code the kernel compares with literals.
Judged against plain PyTorch on the synthesised inputs."""

import copy

import kernel_use_kernels as K
import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize

_SYNTHESIZED: dict = {}


def _found(fn):
    # Once per Function (interpreted probes take seconds), a deep copy for each test.
    if fn not in _SYNTHESIZED:
        _SYNTHESIZED[fn] = synthesize(fn)
    found = _SYNTHESIZED[fn]
    assert isinstance(found, Synthesized), found.reason
    return copy.deepcopy(found)


def _sets(fn):
    found = _found(fn)
    return [found.args, *(v.args for v in found.variants)]


def _agrees(fn, reference, args):
    # Independent of gradsmith: outputs and autograd gradients against the reference.
    mine = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
            else a for a in args]
    ref = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
           else a for a in args]
    out, want = fn.apply(*mine), reference(*ref)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=out.dtype)
    out.backward(g)
    want.backward(g)
    for a, b in zip(mine, ref):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn", [K.PickedLoss, K.PickedLossInline], ids=["name", "expression"])
def test_a_value_the_kernel_compares_with_column_offsets_is_a_class_index(fn):
    logits, picks = _found(fn).args
    assert picks.shape == logits.shape[:-1]
    for logits, picks in _sets(fn):  # also the non-contiguous index: (2, n).T
        assert picks.dtype == torch.int64
        assert 0 <= int(picks.min()) and int(picks.max()) < logits.shape[-1]


class PickedRows(torch.autograd.Function):
    """``scores[i, picks[i]]``: the host code casts ``picks`` with ``.long()`` (no kernel)."""

    @staticmethod
    def forward(ctx, scores, picks):
        rows, idx = torch.arange(scores.shape[0]), picks.long()
        ctx.save_for_backward(rows, idx)
        ctx.shape = scores.shape
        return scores[rows, idx]

    @staticmethod
    def backward(ctx, g):
        rows, idx = ctx.saved_tensors
        return g.new_zeros(ctx.shape).index_put_((rows, idx), g), None


def test_a_value_the_host_casts_with_long_is_a_class_index():
    scores, picks = _found(PickedRows).args
    assert picks.dtype == torch.int64 and not picks.requires_grad
    assert 0 <= int(picks.min()) and int(picks.max()) < scores.shape[-1]
    _agrees(PickedRows, lambda s, p: s.gather(1, p.long().unsqueeze(1)).squeeze(1),
            (scores, picks))


def test_float_picks_match_no_class_and_the_kernel_computes_another_function():
    # Why float values are invalid: no column equals them, the loss becomes logsumexp - max.
    logits = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    picks = torch.tensor([0.3, -1.2, 0.7], dtype=torch.float64)
    got = K.PickedLoss.apply(logits, picks)
    want = (torch.logsumexp(logits, -1) - logits.max(-1).values).sum()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_last_dimension_split_in_halves_stays_even():
    sets = _sets(K.HalfRotate)
    assert len(sets) > 2  # other shapes are still tried
    for (x,) in sets:
        assert x.shape[-1] % 2 == 0, x.shape


def test_an_int_code_the_kernel_compares_with_literals():
    found = _found(K.Coded)
    assert found.args[1] == 0 and isinstance(found.args[1], int)
    assert "form=1" in [v.change for v in found.variants]


def test_a_float_the_kernel_compares_with_one_stays_a_float():
    x, alpha = _found(K.Scaled).args
    assert isinstance(alpha, float) and alpha != 1
    _agrees(K.Scaled, lambda t, a: t * a, (x, alpha))


@pytest.mark.parametrize("fn, reference", [
    (K.PickedLoss, K.picked_loss_reference),
    (K.HalfRotate, K.half_rotate_reference),
    (K.Coded, K.coded_reference),
], ids=["picked-loss", "half-rotate", "coded"])
def test_correct_kernels_agree_with_plain_pytorch_on_every_set(fn, reference):
    for args in _sets(fn):
        if fn is K.PickedLoss and args[1].shape != args[0].shape[:-1]:
            continue  # the transposed (2, n) index: no cross_entropy to compare with
        _agrees(fn, reference, args)


@pytest.mark.parametrize("fn, wrong", [
    (K.PickedLoss, None), (K.PickedLossNoOneHot, "logits"),
    (K.HalfRotate, None), (K.HalfRotateSameWay, "x"),
    (K.Coded, None), (K.CodedBadSquare, "x"),
], ids=["picked-loss", "picked-loss-no-one-hot", "half-rotate", "half-rotate-same-way",
        "coded", "coded-bad-square"])
def test_zero_config_verdicts_on_every_set(fn, wrong):
    bad = set()
    for args in _sets(fn):
        report = gradsmith.check(fn, *args, checks=["gradients"])
        bad |= {(f.code, f.input) for f in report.findings if f.is_error}
    assert bad == (set() if wrong is None else {("gradient-mismatch", wrong)}), bad
