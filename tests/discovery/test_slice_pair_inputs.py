"""A parameter forward walks and slices with each item as a (start, stop) pair (``for slc in
slices: x[slice(*slc)]``, ``for s, e in ranges: x[s:e]``) is a list of such pairs (issue 18,
corpus 12a dev: yastn's kernel_negate_blocks got a float and was a skip). Reduced cases,
written here; each planted wrong backward FAILs."""

import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import torch


class NegateBlocks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, data, slices):
        out = data.clone()
        for slc in slices:
            out[slice(*slc)] *= -1
        ctx.slices = slices
        return out

    @staticmethod
    def backward(ctx, g):
        grad = g.clone()
        for slc in ctx.slices:
            grad[slice(*slc)] *= {negate}
        return grad, None


class ScaleRanges(torch.autograd.Function):
    @staticmethod
    def forward(ctx, data, ranges):
        out = data.clone()
        for start, stop in ranges:
            out[start:stop] = out[start:stop] * 3
        ctx.ranges = ranges
        return out

    @staticmethod
    def backward(ctx, g):
        grad = g.clone()
        for start, stop in ctx.ranges:
            grad[start:{stop}] = grad[start:{stop}] * 3
        return grad, None
'''
RIGHT = {"negate": "-1", "stop": "stop"}
WRONG = {"negate": "1", "stop": "stop + 1"}  # planted: no sign flip; one row too many


def test_the_reduced_backwards_are_autograd_of_the_same_forward(tmp_path):
    path = tmp_path / "pairs_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "pairs_case")
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(5, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(5, 2, dtype=torch.float64, generator=gen)
    sign = torch.tensor([-1.0, 1, -1, -1, 1], dtype=torch.float64)[:, None]
    got = torch.autograd.grad(module.NegateBlocks.apply(x, [(0, 1), (2, 4)]), x, g)
    torch.testing.assert_close(got, torch.autograd.grad(x * sign, x, g))
    scale = torch.tensor([3.0, 1, 3, 3, 1], dtype=torch.float64)[:, None]
    got = torch.autograd.grad(module.ScaleRanges.apply(x, [(0, 1), (2, 4)]), x, g)
    torch.testing.assert_close(got, torch.autograd.grad(x * scale, x, g))


def test_slice_pairs_are_synthesised_and_planted_wrong_backwards_fail(tmp_path):
    rows = check_rows(tmp_path / "pairs_right.py", SOURCE.format(**RIGHT))
    for name in ("NegateBlocks", "ScaleRanges"):
        row = rows[name]
        assert row["verdict"] == "pass", (name, row["reason"], row["report"]["findings"])
        assert "=[(0, 1), (2, 3)] ((start, stop) pairs" in row["inputs"], row["inputs"]
    rows = check_rows(tmp_path / "pairs_wrong.py", SOURCE.format(**WRONG))
    for name in ("NegateBlocks", "ScaleRanges"):
        assert rows[name]["verdict"] == "fail", (name, rows[name]["reason"])
        assert "gradient-mismatch" in error_codes(rows[name]), error_codes(rows[name])
