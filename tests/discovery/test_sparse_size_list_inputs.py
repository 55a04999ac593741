"""A sparse tensor whose size is given as separate integers: ``torch.Size([n1, n2, f])``.

Reduced from corpus 11c dev (CompRAM ``SpecialSpmm``): per-edge feature rows summed per node
through a hybrid sparse tensor (edges ``(2, E)``, values ``(E, F)``). The sizes were
synthesised as tensors and floats, and every layout failed: a skip.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.sparse_triples import sparse_triple
from gradsmith.discovery.synthesize import Synthesized, synthesize


class EdgeSum(Function):
    """out[i] = sum of the rows of ``edge_w`` whose edge starts (dim=1) or ends (dim=0) at i."""

    @staticmethod
    def forward(ctx, edge, edge_w, size1, size2, features, dim):
        a = torch.sparse_coo_tensor(edge, edge_w, torch.Size([size1, size2, features]))
        ctx.keep = a._indices()[1 if dim == 0 else 0]
        return torch.sparse.sum(a, dim=dim).to_dense()

    @staticmethod
    def backward(ctx, g):
        return None, g[ctx.keep], None, None, None, None


class WrongEdgeSum(EdgeSum):
    """Planted: the gradient of every edge read at node 0."""

    @staticmethod
    def backward(ctx, g):
        return None, g[torch.zeros_like(ctx.keep)], None, None, None, None


def test_the_size_list_is_read_as_three_integer_parameters():
    assert sparse_triple(EdgeSum.forward, ["ctx", "edge", "edge_w", "size1", "size2",
                                           "features", "dim"]) == (
        "edge", "edge_w", ("size1", "size2", "features"))


def test_a_hybrid_edge_list_is_synthesised_and_passes():
    found = synthesize(EdgeSum)
    assert isinstance(found, Synthesized) and not found.doubt, found
    edge, edge_w, n1, n2, f, dim = found.args
    assert edge.dtype == torch.int64 and edge.shape[0] == 2 and edge_w.shape == (
        edge.shape[1], f) and isinstance(n1, int) and isinstance(dim, int)
    assert gradsmith.check(EdgeSum, *found.args).passed
    # independent reference: the same sum as a dense index_add, by autograd
    w = edge_w.detach().clone().requires_grad_()
    rows = edge[1] if dim == 0 else edge[0]
    dense = torch.zeros(n2 if dim == 0 else n1, f, dtype=w.dtype).index_add(0, rows, w)
    torch.testing.assert_close(EdgeSum.apply(*found.args), dense)
    g = torch.randn_like(dense)
    dense.backward(g)
    torch.testing.assert_close(g[rows], w.grad)


def test_a_planted_wrong_gather_still_fails():
    found = synthesize(WrongEdgeSum)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(WrongEdgeSum, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report
