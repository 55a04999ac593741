"""A matrix operand listed after the input it multiplies, and its adjoint passed beside it
(issue 18, corpus 9a held-out: a sparse-matrix product ``forward(x, matrix, matrix_adjoint)``
returning ``matrix @ x``, backward ``matrix_adjoint @ grad``).

Synthesis made ``matrix`` a vector (the first layout on which forward ran), backward's gradient
then had the wrong shape: a false ``grad-shape-mismatch``. Now ``matrix`` is a matrix whose
columns match ``x``'s rows, and ``matrix_adjoint`` (named as its adjoint, no gradient returned
for it) is ``matrix.mH``. Reduced case written here; gradients compared with autograd of
``matrix @ x``; a backward applying twice the adjoint, or dropping the incoming gradient's sign, still fails.
"""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize

SOURCE = '''
import torch


class Apply(torch.autograd.Function):
    @staticmethod
    def forward(x, matrix, matrix_adjoint):
        return matrix @ x

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, matrix, matrix_adjoint = inputs
        ctx.save_for_backward(matrix, matrix_adjoint)

    @staticmethod
    def backward(ctx, grad_output):
        matrix, matrix_adjoint = ctx.saved_tensors
        return {grad}, None, None
'''
RIGHT = "matrix_adjoint @ grad_output"
WRONG = {"twice": "2 * matrix_adjoint @ grad_output",
         "the incoming gradient's sign dropped": "matrix_adjoint @ grad_output.abs()"}


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "pair_ops.py"
    path.write_text(SOURCE.format(grad=RIGHT))
    return load_source(path, "pair_ops")


def test_the_matrix_is_a_matrix_and_its_adjoint_is_its_conjugate_transpose(module):
    found = synthesize(module.Apply)
    assert isinstance(found, Synthesized)
    x, matrix, adjoint = found.args
    assert matrix.dim() == 2 and matrix.shape[1] == x.shape[0]
    torch.testing.assert_close(adjoint, matrix.mH)
    assert "matrix_adjoint: float64 (3, 5) = matrix.mH" in found.description
    for variant in found.variants:
        vx, vm, va = variant.args
        torch.testing.assert_close(va, vm.mH)
        assert vm.shape[1] == vx.shape[0]
    # the Function's gradient is autograd's of matrix @ x on these inputs
    xg = x.detach().clone().requires_grad_()
    g = torch.randn(matrix.shape[0], x.shape[1], dtype=torch.float64)
    (got,) = torch.autograd.grad(module.Apply.apply(xg, matrix, adjoint), xg, g)
    ref = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(matrix.detach() @ ref, ref, g)
    torch.testing.assert_close(got, want)


def test_the_product_passes_and_a_wrong_adjoint_fails(tmp_path):
    row = check_rows(tmp_path / "right_pair.py", SOURCE.format(grad=RIGHT))["Apply"]
    assert row["verdict"] == "pass", row["report"]["findings"]
    for name, grad in WRONG.items():
        row = check_rows(tmp_path / f"wrong_{len(grad)}.py", SOURCE.format(grad=grad))["Apply"]
        assert row["verdict"] == "fail", name
        assert error_codes(row) & {"gradient-mismatch", "grad-shape-mismatch"}, name


def test_an_adjoint_that_gets_a_gradient_is_not_tied_to_the_map():
    from gradsmith.discovery.adjoint_pairs import adjoint_pairs

    assert adjoint_pairs(["x", "A", "A_H"], {"A_H"}) == {"A_H": "A"}
    assert adjoint_pairs(["x", "A", "A_H"], set()) == {}  # backward differentiates it
    assert adjoint_pairs(["start", "star"], {"start"}) == {}  # no bare "t" suffix
