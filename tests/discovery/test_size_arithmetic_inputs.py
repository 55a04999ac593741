"""Arguments the code does size arithmetic with are Python ints, and a module's function of the
same name as a ctx attribute is not a callable argument (issue 18, corpus 12b dev:
CMPUT566-Project's loop convolution took ``pad`` as a tensor, then as a callable because
backward calls ``F.pad`` beside ``ctx.pad``, and no layout ran). Reduced case, written here:
a 1-D convolution by loops whose output size is ``1 + (L + 2 * pad - K) // stride``; the
planted wrong backward FAILs."""

import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery.backward_reads import backward_functions

SOURCE = '''
import torch
import torch.nn.functional as F


class LoopConv1d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, stride, pad):
        N, C, L = x.shape
        O, _, K = w.shape
        L_out = 1 + (L + 2 * pad - K) // stride
        xp = F.pad(x, (pad, pad))
        z = x.new_zeros((N, O, L_out))
        for i in range(L_out):
            z[:, :, i] = torch.einsum("nck,ock->no", xp[:, :, i * stride:i * stride + K], w) + b
        ctx.save_for_backward(x, w)
        ctx.stride, ctx.pad = stride, pad
        return z

    @staticmethod
    def backward(ctx, dz):
        x, w = ctx.saved_tensors
        stride, pad = ctx.stride, ctx.pad
        K = w.shape[2]
        xp = F.pad(x, (pad, pad))
        dxp, dw = torch.zeros_like(xp), torch.zeros_like(w)
        for i in range(dz.shape[2]):
            window = xp[:, :, i * stride:i * stride + K]
            dw += torch.einsum("no,nck->ock", dz[:, :, i], window)
            dxp[:, :, i * stride:i * stride + K] += torch.einsum("no,ock->nck", dz[:, :, i], w)
        dx = dxp[:, :, pad:pad + x.shape[2]]
        return {dx}, dw, dz.sum((0, 2)), None, None
'''


def test_the_reduced_backward_is_autograd_of_conv1d(tmp_path):
    path = tmp_path / "loop_conv.py"
    path.write_text(SOURCE.format(dx="dx"))
    conv = load_source(path, "loop_conv").LoopConv1d
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 7, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(4, 3, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, generator=gen, requires_grad=True)
    for stride, pad in ((1, 0), (2, 1), (1, 2)):
        out = conv.apply(x, w, b, stride, pad)
        want_out = torch.nn.functional.conv1d(x, w, b, stride=stride, padding=pad)
        torch.testing.assert_close(out, want_out)
        g = torch.randn_like(out)
        got = torch.autograd.grad(out, (x, w, b), g)
        want = torch.autograd.grad(want_out, (x, w, b), g)
        for a, c in zip(got, want):
            torch.testing.assert_close(a, c)


def test_a_module_function_named_like_a_ctx_attribute_is_not_a_callable_argument(tmp_path):
    path = tmp_path / "loop_conv_fn.py"
    path.write_text(SOURCE.format(dx="dx"))
    conv = load_source(path, "loop_conv_fn").LoopConv1d
    assert backward_functions(conv, ["x", "w", "b", "stride", "pad"]) == set()


def test_size_arithmetic_makes_ints_and_the_planted_wrong_backward_fails(tmp_path):
    rows = check_rows(tmp_path / "conv_right.py", SOURCE.format(dx="dx"))
    row = rows["LoopConv1d"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    assert "stride=1 (an int: forward computes a tensor's size with it)" in row["inputs"], row["inputs"]
    assert "pad=2 (an int: forward computes" in row["inputs"], row["inputs"]
    # planted: the padded gradient returned uncropped-then-shifted (off by the padding)
    rows = check_rows(tmp_path / "conv_wrong.py", SOURCE.format(
        dx="dxp[:, :, :x.shape[2]]"))
    row = rows["LoopConv1d"]
    assert row["verdict"] == "fail", row
    assert "gradient-mismatch" in error_codes(row), error_codes(row)
