"""Grid-sample contracts (issue 18, corpus 9a held-out: an adjoint grid sample whose forward
calls the aten grid-sampler backward kernel on ``torch.empty(1).broadcast_to(xshape)``).

No layout gave the grid ``(N, H, W, 2)`` and ``xshape`` was a float tensor: a skip. Now a
parameter passed to a grid sampler as its grid is ``(2, 4, 5, 2)`` with coordinates in
(-1, 1), the other tensors ``(2, 3, 4, 5)``, and a parameter forward builds a tensor's shape
from and reads as a sequence is the first tensor's ``torch.Size``. Reduced cases written here;
gradients compared with autograd of ``F.grid_sample`` (torch's own); planted wrong backwards
FAIL.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize

SOURCE = '''
import torch
import torch.nn.functional as F


class AdjointSample(torch.autograd.Function):
    @staticmethod
    def forward(y, grid, xshape, align_corners=True):
        if y.shape[0] != grid.shape[0]:
            raise ValueError("y and grid must have the same batch")
        if xshape[1] != y.shape[1]:
            raise ValueError("xshape and y must have the same channels")
        dummy = torch.empty(1, dtype=y.dtype).broadcast_to(xshape)
        op = torch.ops.aten.grid_sampler_2d_backward
        return op(y, dummy, grid, 0, 0, align_corners, [True, False])[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, grid, _, align_corners = inputs
        ctx.align_corners = align_corners
        ctx.save_for_backward(grid)

    @staticmethod
    def backward(ctx, g):
        (grid,) = ctx.saved_tensors
        return torch.grid_sampler(g, grid, 0, 0, {corners}), None, None, None


class Sample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, grid):
        ctx.save_for_backward(x, grid)
        return F.grid_sample(x, grid, align_corners=False)

    @staticmethod
    def backward(ctx, g):
        x, grid = ctx.saved_tensors
        gx, gg = torch.ops.aten.grid_sampler_2d_backward(g, x, grid, 0, 0, False, [True, True])
        return gx, {gg}
'''
RIGHT = {"corners": "ctx.align_corners", "gg": "gg"}


def test_the_grid_and_the_shape_follow_the_sampler(tmp_path):
    path = tmp_path / "grids_ok.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "grids_ok")
    found = synthesize(module.Sample)
    assert isinstance(found, Synthesized), found
    x, grid = found.args
    assert grid.shape == (x.shape[0], 4, 5, 2) and grid.abs().max() < 1
    assert "coordinates in [-1, 1]" in found.description
    gs = torch.randn(module.Sample.apply(x, grid).shape, dtype=torch.float64)
    got = torch.autograd.grad(module.Sample.apply(x, grid), (x, grid), gs)
    xr, gr = (t.detach().clone().requires_grad_() for t in (x, grid))
    want = torch.autograd.grad(F.grid_sample(xr, gr, align_corners=False), (xr, gr), gs)
    torch.testing.assert_close(got, want)

    found = synthesize(module.AdjointSample)
    assert isinstance(found, Synthesized), found
    y, grid, xshape, corners = found.args
    assert xshape == y.shape and grid.shape == (y.shape[0], *y.shape[2:], 2)
    # forward is the adjoint of x -> grid_sample(x, grid): torch's vjp of grid_sample at y
    xr = torch.zeros(xshape, dtype=torch.float64, requires_grad=True)
    (want,) = torch.autograd.grad(F.grid_sample(xr, grid.detach(), align_corners=corners),
                                  xr, y.detach())
    torch.testing.assert_close(module.AdjointSample.apply(y, grid, xshape, corners), want)


def test_grid_samples_pass_and_planted_wrong_backwards_fail(tmp_path):
    rows = check_rows(tmp_path / "grids_right.py", SOURCE.format(**RIGHT))
    for name in ("Sample", "AdjointSample"):
        assert rows[name]["verdict"] == "pass", (name, rows[name]["report"]["findings"])
    wrong = check_rows(tmp_path / "grids_wrong.py",
                       SOURCE.format(corners="not ctx.align_corners", gg="2 * gg"))
    for name in ("Sample", "AdjointSample"):
        assert wrong[name]["verdict"] == "fail", name
        assert "gradient-mismatch" in error_codes(wrong[name]), name
