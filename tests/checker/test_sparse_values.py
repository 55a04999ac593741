"""Functions taking sparse operands (COO, CSR, CSC) are checked on the operands' stored values.

Reference: the gradient of the same expression written with autograd on the values (a
sparse tensor rebuilt from a values leaf), and finite differences (the check's own)."""

import pytest
import torch

import gradsmith

pytestmark = [pytest.mark.filterwarnings("ignore:Sparse C:UserWarning"),
              pytest.mark.filterwarnings("ignore:Sparse invariant:UserWarning")]
DENSE = torch.tensor([[1.5, 0, 2.0], [0, -3.0, 0], [4.0, 0, 0.5]], dtype=torch.float64)
LAYOUTS = {"coo": lambda d: d.to_sparse(), "csr": lambda d: d.to_sparse_csr(),
           "csc": lambda d: d.to_sparse_csc()}


def _row_squares(scale: float, dense_grad: bool) -> type:
    """Row sums of A's squared entries; backward ``scale * A * g`` (2 is right) on A's pattern,
    returned dense or in A's own layout."""

    class RowSquares(torch.autograd.Function):
        @staticmethod
        def forward(ctx, A):
            ctx.save_for_backward(A)
            return (A.to_dense() ** 2).sum(1, keepdim=True)

        @staticmethod
        def backward(ctx, g):
            (A,) = ctx.saved_tensors
            d = A.to_dense()
            grad = scale * d * g * (d != 0)
            if dense_grad:
                return grad
            return {torch.sparse_coo: grad.to_sparse, torch.sparse_csr: grad.to_sparse_csr,
                    torch.sparse_csc: grad.to_sparse_csc}[A.layout]()

    return RowSquares


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dense_grad", [True, False])
def test_right_backward_passes_in_every_layout(layout, dense_grad):
    A = LAYOUTS[layout](DENSE).requires_grad_()
    report = gradsmith.check(_row_squares(2.0, dense_grad), A)
    assert report.passed, report.findings
    # independent reference: autograd of the same expression on the values
    fn = _row_squares(2.0, dense_grad)
    v = (A.detach().coalesce() if layout == "coo" else A.detach()).values().clone()
    v.requires_grad_()
    rebuilt = {"coo": lambda: torch.sparse_coo_tensor(A.detach().coalesce().indices(), v,
                                                      (3, 3)),
               "csr": lambda: torch.sparse_csr_tensor(A.crow_indices(), A.col_indices(), v,
                                                      (3, 3)),
               "csc": lambda: torch.sparse_csc_tensor(A.ccol_indices(), A.row_indices(), v,
                                                      (3, 3))}[layout]()
    (got,) = torch.autograd.grad(fn.apply(rebuilt).sum(), v)
    torch.testing.assert_close(got, 2 * v.detach())


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_planted_wrong_backward_fails(layout):
    A = LAYOUTS[layout](DENSE).requires_grad_()
    report = gradsmith.check(_row_squares(3.0, layout != "csr"), A)
    assert not report.passed
    assert any(f.code == "gradient-mismatch" and f.is_error for f in report.findings)


def test_gradient_of_the_wrong_shape_is_still_an_error():
    """A gradient shaped like the values rather than the operand is what autograd rejects."""

    class ValuesShaped(torch.autograd.Function):
        @staticmethod
        def forward(ctx, A):
            ctx.save_for_backward(A)
            return A.to_dense().sum(1)

        @staticmethod
        def backward(ctx, g):
            (A,) = ctx.saved_tensors
            return torch.ones_like(A.values())

    report = gradsmith.check(ValuesShaped, DENSE.to_sparse_csc().requires_grad_())
    assert any(f.code == "grad-shape-mismatch" and f.is_error for f in report.findings)
