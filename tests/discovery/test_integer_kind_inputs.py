"""Integer tensors the code indexes, counts or measures with are synthesised as int64 from their
use, and a float-index error on a tensor synthesised as float by guess is a doubt, not a
defect (issue 18, corpus 12 parts c and d: ``indices == n_idx`` over a weight's rows left an
output uninitialised, ``repeat_interleave(bias, token_counts, output_size=...)`` was "not
implemented for 'Double'", and backward's ``beta[b, lengths[b]]`` on float lengths was a FAIL
blamed on the Function). Reduced cases, written here; each planted wrong backward FAILs."""

import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import torch


class PickedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W, indices):
        n, out_features, in_features = W.shape
        Y = X.new_empty((*X.shape[:-1], out_features))
        for n_idx in range(n):
            rows = torch.where(indices == n_idx)
            Y[rows] = X[rows] @ W[n_idx].t()
        ctx.save_for_backward(X, W, indices)
        return Y

    @staticmethod
    def backward(ctx, g):
        X, W, indices = ctx.saved_tensors
        grad_X, grad_W = torch.zeros_like(X), torch.zeros_like(W)
        for n_idx in range(W.shape[0]):
            rows = torch.where(indices == n_idx)
            grad_X[rows] = g[rows] @ {picked}
            grad_W[n_idx] = g[rows].t() @ X[rows]
        return grad_X, grad_W, None


class GroupBias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, bias, counts, output_size):
        ctx.save_for_backward(counts)
        return torch.repeat_interleave(bias, counts, dim=0, output_size=output_size)

    @staticmethod
    def backward(ctx, g):
        (counts,) = ctx.saved_tensors
        groups = torch.repeat_interleave(torch.arange(len(counts)), counts)
        grad = torch.zeros(len(counts), g.shape[1], dtype=g.dtype).index_add(0, groups, g)
        return {bias_grad}, None, None


class MaskedSquares(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lengths):
        out = x.new_zeros(x.shape[0])
        for t in range(x.shape[1]):
            out = out + torch.where(t < lengths, x[:, t].pow(2), 0.0)
        ctx.save_for_backward(x, lengths)
        return out

    @staticmethod
    def backward(ctx, g):
        x, lengths = ctx.saved_tensors
        grad = 2 * x * g[:, None]
        for b in range(x.shape[0]):
            {mask}
        return grad, None
'''
RIGHT = {"picked": "W[n_idx]", "bias_grad": "grad", "mask": "grad[b, lengths[b]:] = 0"}
# planted: the transposed weight; the first row of each group only; no length mask at all
WRONG = {"picked": "W[n_idx].t().t().flip(0)", "bias_grad": "g[:len(counts)]",
         "mask": "pass"}

SAVED_ONLY = '''
import torch


class SavedLengths(torch.autograd.Function):
    """Forward only saves ``lengths``; nothing says they are integers until backward."""

    @staticmethod
    def forward(ctx, x, lengths):
        ctx.save_for_backward(x, lengths)
        return x.sum(1)

    @staticmethod
    def backward(ctx, g):
        x, lengths = ctx.saved_tensors
        grad = g[:, None].expand_as(x).clone()
        for b in range(x.shape[0]):
            grad[b, lengths[b]] = {value}
        return grad, None


class FloatPositions(torch.autograd.Function):
    """``pos`` is differentiated: its float kind is the Function's, and so is the error."""

    @staticmethod
    def forward(ctx, x, pos):
        ctx.save_for_backward(x, pos)
        return x * pos

    @staticmethod
    def backward(ctx, g):
        x, pos = ctx.saved_tensors
        return g * pos, g * x[pos]
'''


def test_the_reduced_backwards_are_autograd_of_the_same_forward(tmp_path):
    path = tmp_path / "ints_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "ints_case")
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(2, 3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    W = torch.randn(3, 5, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    idx = torch.tensor([[0, 2, 1], [2, 2, 0]])
    g = torch.randn(2, 3, 5, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(module.PickedLinear.apply(X, W, idx), (X, W), g)
    want = torch.autograd.grad(torch.einsum("bsi,bsoi->bso", X, W[idx]), (X, W), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    bias = torch.randn(3, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    counts = torch.tensor([2, 1, 3])
    g = torch.randn(6, 2, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(module.GroupBias.apply(bias, counts, 6), bias, g)
    want = torch.autograd.grad(bias[torch.tensor([0, 0, 1, 2, 2, 2])], bias, g)
    torch.testing.assert_close(got, want)
    lengths = torch.tensor([3, 1])
    g = torch.randn(2, dtype=torch.float64, generator=gen)
    x = X[..., 0]
    got = torch.autograd.grad(module.MaskedSquares.apply(x, lengths), x, g)
    mask = torch.arange(3)[None, :] < lengths[:, None]
    want = torch.autograd.grad((x.pow(2) * mask).sum(1), x, g)
    torch.testing.assert_close(got, want)


def test_integer_uses_give_int64_inputs_and_planted_wrong_backwards_fail(tmp_path):
    rows = check_rows(tmp_path / "ints_right.py", SOURCE.format(**RIGHT))
    said = {"PickedLinear": "indices: int64", "GroupBias": "counts: int64",
            "MaskedSquares": "lengths: int64"}
    for name, text in said.items():
        assert rows[name]["verdict"] == "pass", (name, rows[name]["report"]["findings"])
        assert text in rows[name]["inputs"], rows[name]["inputs"]
    assert "output_size=" in rows["GroupBias"]["inputs"]
    rows = check_rows(tmp_path / "ints_wrong.py", SOURCE.format(**WRONG))
    found = {"PickedLinear": "gradient-mismatch", "GroupBias": "gradient-mismatch",
             "MaskedSquares": "undeclared-estimator"}  # a forgotten mask, as it says
    for name, code in found.items():
        assert rows[name]["verdict"] == "fail", (name, rows[name])
        assert code in error_codes(rows[name]), (name, error_codes(rows[name]))


def test_a_float_index_error_on_a_guessed_float_is_a_skip_and_on_an_own_input_a_failure(
        tmp_path):
    rows = check_rows(tmp_path / "saved_lengths.py", SAVED_ONLY.format(value="0"))
    row = rows["SavedLengths"]
    assert row["verdict"] == "skip", row
    assert "integer kind" in row["reason"] and "lengths" in row["reason"], row["reason"]
    row = rows["FloatPositions"]
    assert row["verdict"] == "fail", row
    assert "backward-error" in error_codes(row)
