"""A matrix function applied to a NumPy copy of the input is read as one (issue 18, corpus 11
part a: ``sqrtm(input.detach().cpu().numpy().astype(np.float_))`` hid the parameter behind
``astype``, so the symmetric positive-definite contract was not used; a (2, 3, 6, 6) random
batch made forward's real part piecewise constant and a correct Sylvester backward FAILed as
an undeclared estimator). Reduced case, written here: a principal square root through NumPy
with the Sylvester-equation backward (exact for symmetric positive-definite matrices)."""

import numpy as np
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery.formula_domains import read_formula_domains
from gradsmith.discovery.hints import Hint

SOURCE = '''
import numpy as np
import torch


def sqrtm(m):
    """The principal square root of a symmetric positive-definite matrix (NumPy)."""
    vals, vecs = np.linalg.eigh(m)
    return (vecs * np.sqrt(vals)) @ vecs.T


def solve_sylvester(s, g):
    """X with S X + X S = G for a symmetric positive-definite S."""
    vals, vecs = np.linalg.eigh(s)
    return vecs @ ((vecs.T @ g @ vecs) / (vals[:, None] + vals[None, :])) @ vecs.T


class RootOfMatrix(torch.autograd.Function):
    """A differentiable square root of a positive definite matrix."""

    @staticmethod
    def forward(ctx, input):
        m = input.detach().cpu().numpy().astype(np.float64)
        root = torch.from_numpy(sqrtm(m).real).to(input)
        ctx.save_for_backward(root)
        return root

    @staticmethod
    def backward(ctx, grad_output):
        (root,) = ctx.saved_tensors
        s = root.data.cpu().numpy().astype(np.float64)
        g = grad_output.data.cpu().numpy().astype(np.float64)
        return torch.from_numpy({grad}).to(grad_output)
'''
RIGHT = "solve_sylvester(s, g)"
WRONG = "solve_sylvester(s, g) * 2"  # a planted wrong factor


def test_the_parameter_is_read_through_its_numpy_copy():
    def forward(ctx, input):
        m = input.detach().cpu().numpy().astype(np.float64)
        return sqrtm(m)  # noqa: F821 - read, never run

    hints = {"input": Hint()}
    read_formula_domains(forward, None, hints)
    assert hints["input"].matrix == "spd"


def test_the_sylvester_backward_is_the_gradient_of_the_root(tmp_path):
    path = tmp_path / "root_case.py"
    path.write_text(SOURCE.format(grad=RIGHT))
    module = load_source(path, "root_case")
    gen = torch.Generator().manual_seed(0)
    b = torch.randn(4, 4, dtype=torch.float64, generator=gen)
    a = (b @ b.T / 4 + torch.eye(4, dtype=torch.float64)).requires_grad_()
    g = torch.randn(4, 4, dtype=torch.float64, generator=gen)
    g = g + g.T  # the root is symmetric: compare along symmetric cotangents
    (got,) = torch.autograd.grad(module.RootOfMatrix.apply(a), a, g)
    ref = a.detach().clone().requires_grad_()
    vals, vecs = torch.linalg.eigh(ref)  # autograd of an independent expression
    (want,) = torch.autograd.grad((vecs * vals.sqrt()) @ vecs.mT, ref, g)
    torch.testing.assert_close(got, (want + want.mT) / 2)


def test_the_root_passes_on_a_2d_spd_matrix_and_a_wrong_factor_fails(tmp_path):
    row = check_rows(tmp_path / "root_right.py", SOURCE.format(grad=RIGHT))["RootOfMatrix"]
    assert row["verdict"] == "pass", row["report"]["findings"]
    assert "(4, 4) (symmetric positive definite" in row["inputs"]
    row = check_rows(tmp_path / "root_wrong.py", SOURCE.format(grad=WRONG))["RootOfMatrix"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)
