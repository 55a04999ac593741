"""A sparse matrix passed in CSR form (shape, values, column indices, row pointers) is
synthesised as one (issue 18, corpus 12 part a: a CSR library's nine Functions were skipped,
their compiled kernels rejecting float row pointers and a None shape). Reduced cases, written
here: a CSR matrix-vector product whose backward scatters ``g[row] * x[col]`` onto the stored
values, and a lower-triangular selection of the stored entries whose backward is a scatter
of the incoming gradient."""

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery.csr_operands import csr_groups, csr_matrix

SOURCE = '''
import torch


def _rows(rowptr):
    return torch.repeat_interleave(torch.arange(len(rowptr) - 1), rowptr[1:] - rowptr[:-1])


class CsrMatVec(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A_shape, A_data, A_col_ind, A_rowptr, x):
        rows = _rows(A_rowptr)
        ctx.save_for_backward(A_data, A_col_ind, rows, x)
        ctx.m = A_shape[0]
        return torch.zeros(A_shape[0], dtype=x.dtype).index_add(0, rows, A_data * x[A_col_ind])

    @staticmethod
    def backward(ctx, g):
        data, col, rows, x = ctx.saved_tensors
        grad_x = torch.zeros_like(x).index_add(0, col, data * g[rows])
        return None, {grad_data}, None, None, grad_x


class CsrLower(torch.autograd.Function):
    @staticmethod
    def forward(ctx, shape, A_data, A_col_ind, A_rowptr):
        keep = A_col_ind <= _rows(A_rowptr)
        ctx.save_for_backward(keep, A_data)
        return A_data[keep]

    @staticmethod
    def backward(ctx, g):
        keep, data = ctx.saved_tensors
        grad = torch.zeros_like({like})
        grad[keep] = g.to(grad.dtype)
        return None, grad, None, None
'''
RIGHT = {"grad_data": "g[rows] * x[col]", "like": "data"}
# planted: the row's x instead of the column's; the gradient held in an int64 buffer
WRONG = {"grad_data": "g[rows] * x[rows]", "like": "keep.long()"}


def test_groups_are_read_from_names_and_from_a_csr_builder():
    assert csr_groups(None, ["A_shape", "A_data", "A_col_ind", "A_rowptr", "x"]) == [
        ("A_data", "A_col_ind", "A_rowptr", "A_shape")]
    assert csr_groups(None, ["shape", "alpha", "A_data", "A_indices", "A_indptr",
                             "B_data", "B_indices", "B_indptr"]) == [
        ("A_data", "A_indices", "A_indptr", "shape"), ("B_data", "B_indices", "B_indptr", "shape")]

    def forward(ctx, crow, col, values, size, x):
        return torch.sparse_csr_tensor(crow, col, values, size) @ x

    assert csr_groups(forward, ["crow", "col", "values", "size", "x"]) == [
        ("values", "col", "crow", "size")]
    assert csr_groups(lambda ctx, x, indices: x[indices], ["x", "indices"]) == []


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")
def test_the_synthesised_matrix_is_valid_csr_and_diagonally_dominant():
    data, col, rowptr = csr_matrix(5, torch.Generator().manual_seed(3))
    dense = torch.sparse_csr_tensor(rowptr, col, data, (5, 5),
                                    check_invariants=True).to_dense()  # validates
    assert col.dtype == rowptr.dtype == torch.int64
    for r in range(5):
        cols = col[rowptr[r]:rowptr[r + 1]]
        assert torch.equal(cols, cols.sort().values) and r in cols.tolist()
        assert dense[r, r] > dense[r].abs().sum() - dense[r, r]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")
def test_the_product_backward_is_autograd_of_the_dense_product(tmp_path):
    path = tmp_path / "csr_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "csr_case")
    data, col, rowptr = csr_matrix(4, torch.Generator().manual_seed(1))
    data.requires_grad_()
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, dtype=torch.float64)
    got = torch.autograd.grad(module.CsrMatVec.apply((4, 4), data, col, rowptr, x), (data, x), g)
    dense = torch.sparse_csr_tensor(rowptr, col, data, (4, 4), check_invariants=True).to_dense()
    want = torch.autograd.grad(dense @ x, (data, x), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_csr_functions_pass_and_planted_wrong_backwards_fail(tmp_path):
    rows = check_rows(tmp_path / "csr_right.py", SOURCE.format(**RIGHT))
    for name in ("CsrMatVec", "CsrLower"):
        assert rows[name]["verdict"] == "pass", rows[name]["report"]["findings"]
        assert "int64 (5,) row pointers" in rows[name]["inputs"]
    rows = check_rows(tmp_path / "csr_wrong.py", SOURCE.format(**WRONG))
    for name in ("CsrMatVec", "CsrLower"):
        assert rows[name]["verdict"] == "fail", rows[name]
        assert "gradient-mismatch" in error_codes(rows[name])
