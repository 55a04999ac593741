"""Integer lists the code reads as dimensions, per-dimension cuts and cut points (issue 18,
corpus 9a held-out: a spectral splitter ``forward(ctx, dims, cuts, x)`` looping ``for n, axis in
enumerate(dims)`` with ``cut = cuts[n]``, and its inverse).

Both lists were synthesised as float tensors and every layout failed (``assert cut % 2 == 0``,
"step must be greater than zero"): a skip. Now ``dims`` is ``[-1]`` and ``cuts`` one integer per
dimension (the first of 2, 0, 1 on which forward runs); ``torch.tensor_split``'s indices are
sorted cut points below the sizes. Reduced cases written here; gradients compared with
autograd of the same ``torch.split``/``torch.cat`` composition; planted wrong backwards FAIL.
"""

from __future__ import annotations

import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize

SOURCE = '''
import torch


def _bands(x, dims, cuts):
    blocks = [x]
    for n, axis in enumerate(dims):
        cut = cuts[n]
        assert cut % 2 == 0
        new = []
        for b in blocks:
            ell = b.shape[axis]
            c = ell // 4 if cut == 0 else cut // 2
            lo, mid, hi = torch.split(b, [c, ell - 2 * c, c], dim=axis)
            new += [torch.cat([lo, hi], dim=axis), mid]
        blocks = new
    return blocks


class SplitBands(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dims, cuts, x):
        blocks = [x]
        for n, axis in enumerate(dims):
            cut = cuts[n]
            assert cut % 2 == 0
            new = []
            for b in blocks:
                ell = b.shape[axis]
                c = ell // 4 if cut == 0 else cut // 2
                lo, mid, hi = torch.split(b, [c, ell - 2 * c, c], dim=axis)
                new += [torch.cat([lo, hi], dim=axis), mid]
            blocks = new
        ctx.save_for_backward(torch.tensor(dims), torch.tensor(cuts))
        return tuple(blocks)

    @staticmethod
    def backward(ctx, *grads):
        dims = ctx.saved_tensors[0].tolist()
        cuts = ctx.saved_tensors[1].tolist()
        blocks = list(grads)
        for n, axis in reversed(list(enumerate(dims))):
            cut = cuts[n]
            merged = []
            for outer, mid in zip(blocks[::2], blocks[1::2]):
                c = outer.shape[axis] // 2 if cut == 0 else cut // 2
                lo, hi = torch.split(outer, [c, outer.shape[axis] - c], dim=axis)
                merged.append(torch.cat([lo, {mid}, hi], dim=axis))
            blocks = merged
        return None, None, blocks[0]


class CutSums(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, points):
        ctx.points = points
        ctx.size = x.shape[-1]
        return torch.stack([p.sum(-1) for p in torch.tensor_split(x, points, dim=-1)], -1)

    @staticmethod
    def backward(ctx, g):
        edges = [0, *ctx.points, ctx.size]
        widths = [b - a for a, b in zip(edges, edges[1:])]
        return torch.cat([{k}g[..., i:i + 1].expand(*g.shape[:-1], w)
                          for i, w in enumerate(widths)], -1), None
'''
RIGHT = {"mid": "mid", "k": ""}


def _module(tmp_path, name, **planted):
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE.format(**{**RIGHT, **planted}))
    return load_source(path, name)


def test_dimensions_and_cuts_are_integer_lists_and_the_gradient_is_autograds(tmp_path):
    module = _module(tmp_path, "bands_ok")
    found = synthesize(module.SplitBands)
    assert isinstance(found, Synthesized), found
    dims, cuts, x = found.args
    assert dims == [-1] and cuts == [2]
    assert "dims=[-1] (dimensions" in found.description
    assert "cuts=[2] (one integer per dimension in dims" in found.description
    outs = module.SplitBands.apply(dims, cuts, x)
    gs = [torch.randn(o.shape, dtype=torch.float64) for o in outs]
    (got,) = torch.autograd.grad(outs, x, gs)
    ref = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(module._bands(ref, dims, cuts), ref, gs)
    torch.testing.assert_close(got, want)


def test_cut_points_are_sorted_and_below_the_size(tmp_path):
    module = _module(tmp_path, "cuts_ok")
    found = synthesize(module.CutSums)
    assert isinstance(found, Synthesized), found
    x, points = found.args
    assert points == sorted(points) and all(0 < p < x.shape[-1] for p in points)
    assert "cut points" in found.description


def test_the_lists_check_and_planted_wrong_backwards_fail(tmp_path):
    rows = check_rows(tmp_path / "lists_ok.py", SOURCE.format(**RIGHT))
    assert rows["SplitBands"]["verdict"] == "pass", rows["SplitBands"]["report"]["findings"]
    assert rows["CutSums"]["verdict"] == "pass", rows["CutSums"]["report"]["findings"]
    wrong = check_rows(tmp_path / "lists_wrong.py", SOURCE.format(mid="2 * mid", k="2 * "))
    assert wrong["SplitBands"]["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(wrong["SplitBands"])
    assert wrong["CutSums"]["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(wrong["CutSums"])
