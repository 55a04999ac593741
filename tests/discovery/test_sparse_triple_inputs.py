"""A sparse matrix passed as (indices, values, shape) is synthesised as one (issue 18, corpus
11 part c: ``torch.sparse_coo_tensor(indices, values, shape)`` of three parameters failed on
every layout of random floats and the Function was skipped). Reduced case, written here: a
sparse-dense product whose backward reads the values' gradient off the dense product, with the
flattening stride ``shape[0]`` (right for the square adjacency matrices it is written for)."""

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery.sparse_triples import sparse_triple

SOURCE = '''
import torch


class SparseTimesDense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, values, shape, b):
        a = torch.sparse_coo_tensor(indices, values, shape)
        ctx.save_for_backward(a, b)
        ctx.N = shape[0]
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        dense = grad_output.matmul(b.t())
        edge = a._indices()[0, :] * ctx.N + a._indices()[1, :]
        return None, {grad_values}, None, a.t().matmul(grad_output)
'''
RIGHT = "dense.view(-1)[edge]"
WRONG = "dense.t().reshape(-1)[edge]"  # a planted transposed gradient


def test_the_triple_is_read_positionally_and_by_keyword():
    def forward(ctx, idx, val, size, b):
        return torch.sparse_coo_tensor(indices=idx, values=val, size=size) @ b

    assert sparse_triple(forward, ["idx", "val", "size", "b"]) == ("idx", "val", "size")
    assert sparse_triple(lambda x: x.to_sparse(), ["x"]) is None


@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
def test_the_backward_is_the_gradient_of_the_dense_product(tmp_path):
    path = tmp_path / "sparse_case.py"
    path.write_text(SOURCE.format(grad_values=RIGHT))
    module = load_source(path, "sparse_case")
    gen = torch.Generator().manual_seed(1)
    indices = torch.tensor([[0, 1, 3, 2], [2, 0, 3, 1]])
    values = torch.randn(4, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(4, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(module.SparseTimesDense.apply(indices, values, (4, 4), b),
                              (values, b), g)
    dense = torch.zeros(4, 4, dtype=torch.float64).index_put((indices[0], indices[1]), values)
    want = torch.autograd.grad(dense @ b, (values, b), g)  # autograd of the dense product
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)


def test_the_product_passes_on_a_synthesised_triple_and_a_transposed_gradient_fails(tmp_path):
    row = check_rows(tmp_path / "sparse_right.py", SOURCE.format(grad_values=RIGHT))
    row = row["SparseTimesDense"]
    assert row["verdict"] == "pass", row["report"]["findings"]
    assert "indices: int64 (2, 7) distinct positions in (4, 4)" in row["inputs"]
    row = check_rows(tmp_path / "sparse_wrong.py", SOURCE.format(grad_values=WRONG))
    row = row["SparseTimesDense"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)
