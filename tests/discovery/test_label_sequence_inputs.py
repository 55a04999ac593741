"""A parameter whose items are measured with ``len`` and read label by label holds integer
label sequences, one per row of the batch (issue 18, round 13 task n; reduced from sequence
losses whose forward hands ``targets[b]`` to a helper building a graph from ``len(target)`` and
``target[i]``). Synthesised as float tensors laid out like the emissions, the labels were
fractional and longer than the frames, the loss inf and the row INCOMPLETE; now they are short
int64 sequences, the correct loss passes and a planted wrong backward fails."""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize


class LabelPooling(Function):
    """-sum over the labels of each sequence of logsumexp over time of that label's scores."""

    @staticmethod
    def columns(target):
        return [int(target[i]) for i in range(len(target))]

    @staticmethod
    def forward(ctx, emissions, targets):
        B, T, C = emissions.shape
        labels = [LabelPooling.columns(targets[b]) for b in range(B)]
        ctx.save_for_backward(emissions)
        ctx.labels = labels
        loss = emissions.new_zeros(())
        for b in range(B):
            for c in labels[b]:
                loss = loss - torch.logsumexp(emissions[b, :, c], 0)
        return loss

    @staticmethod
    def backward(ctx, g):
        (emissions,) = ctx.saved_tensors
        grad = torch.zeros_like(emissions)
        for b, labels in enumerate(ctx.labels):
            for c in labels:
                grad[b, :, c] -= torch.softmax(emissions[b, :, c], 0)
        return g * grad, None


class LabelPoolingWrong(LabelPooling):
    @staticmethod
    def backward(ctx, g):
        (emissions,) = ctx.saved_tensors
        grad = torch.zeros_like(emissions)
        for b, labels in enumerate(ctx.labels):
            for c in labels:
                grad[b, :, c] += torch.softmax(emissions[b, :, c], 0)  # planted: sign
        return g * grad, None


def test_label_sequences_are_short_integer_rows_one_per_sequence():
    found = synthesize(LabelPooling)
    assert isinstance(found, Synthesized), found
    emissions, targets = found.args
    B, T, C = emissions.shape
    assert targets.dtype == torch.int64 and targets.shape[0] == B, found.description
    assert 1 <= targets.shape[1] <= max(1, (T - 1) // 2)
    assert int(targets.min()) >= 1 and int(targets.max()) < C
    assert "label sequences" in found.description


def test_the_loss_passes_and_matches_autograd():
    found = synthesize(LabelPooling)
    report = gradsmith.check(LabelPooling, *found.args)
    assert report.passed, report.summary()
    gen = torch.Generator().manual_seed(2)
    e = torch.randn(2, 7, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 1, 3], [2, 4, 1]])
    (got,) = torch.autograd.grad(LabelPooling.apply(e, targets), e)
    f = e.detach().clone().requires_grad_()
    want_loss = -sum(torch.logsumexp(f[b, :, c], 0) for b in range(2) for c in targets[b])
    (want,) = torch.autograd.grad(want_loss, f)
    torch.testing.assert_close(got, want)


def test_a_wrong_backward_still_fails():
    found = synthesize(LabelPoolingWrong)
    assert found.args[1].dtype == torch.int64, found.description
    report = gradsmith.check(LabelPoolingWrong, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report.summary()
