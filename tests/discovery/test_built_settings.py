"""A settings object the project's own class builds (issue 18, corpus 5: a C++ transformer).

``forward(ctx, grid, theta, params)`` hands ``params`` to a helper in another module of its
package, which reads ``params.B``, ``params.nc``, ``params.lo``/``params.hi`` and calls
``params.copy()``. An invented namespace (``B=0.5``) cannot work, and no name says that ``B``
is a (2 nc, d) matrix that ``theta`` (batch, d) meets in a product. The package says it: a
class fills ``self.params`` with exactly these attributes in ``__init__(self, n_cells: int,
backend="list")``, whose docstring lists the backends. Synthesis skipped; now it builds that
object (the documented ``backend="torch"``, since the default's list ``B`` has no ``@``) and
shapes ``theta`` by ``B``'s sizes. Reduced case written here: a piecewise-affine velocity
field ``v(x) = a_c x + b_c`` with ``(a, b) = B theta`` per cell, gradients compared with
autograd of the same expression written with plain torch ops.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

SETTINGS = '''
import torch


class Settings:
    def copy(self):
        new = Settings()
        new.__dict__.update(self.__dict__)
        return new


class Field:
    """Piecewise-affine velocity fields on [0, 1].

    Args:
        n_cells (int): number of cells.
        backend (str, optional): Choose between "*list*", or "*torch*". Defaults to "*list*".
    """

    def __init__(self, n_cells: int, backend: str = "list"):
        self.params = Settings()
        self.params.nc = n_cells
        self.params.lo, self.params.hi = 0.0, 1.0
        basis = torch.randn(2 * n_cells, n_cells + 1, generator=torch.Generator().manual_seed(0),
                            dtype=torch.float64)
        self.params.B = basis if backend == "torch" else basis.tolist()
'''

HELPERS = '''
import torch


def affine(grid, theta, params):
    p = params.copy()
    A = theta @ p.B.T.to(theta.dtype)                      # (batch, 2 nc)
    cell = ((grid - p.lo) / (p.hi - p.lo) * p.nc).floor().clamp(0, p.nc - 1).long()
    return A.gather(1, 2 * cell), A.gather(1, 2 * cell + 1), cell
'''

OPS = '''
import torch
from torch.autograd import Function

from .helpers import affine


class Velocity(Function):
    @staticmethod
    def forward(ctx, grid, theta, params):
        a, b, cell = affine(grid, theta, params)
        ctx.save_for_backward(grid, a, cell)
        ctx.params = params
        return a * grid + b

    @staticmethod
    def backward(ctx, g):
        grid, a, cell = ctx.saved_tensors
        B = ctx.params.B.to(g.dtype)
        dA = torch.zeros(g.shape[0], B.shape[0], dtype=g.dtype)
        dA.scatter_add_(1, 2 * cell, g * grid).scatter_add_(1, 2 * cell + 1, g)
        return g * a, dA @ B, None


class VelocityWrong(Function):
    @staticmethod
    def forward(ctx, grid, theta, params):
        a, b, cell = affine(grid, theta, params)
        ctx.save_for_backward(grid, a, cell)
        ctx.params = params
        return a * grid + b

    @staticmethod
    def backward(ctx, g):
        grid, a, cell = ctx.saved_tensors
        B = ctx.params.B.to(g.dtype)
        dA = torch.zeros(g.shape[0], B.shape[0], dtype=g.dtype)
        dA.scatter_add_(1, 2 * cell, g).scatter_add_(1, 2 * cell + 1, g * grid)  # planted: swapped
        return g * a, dA @ B, None
'''


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    root = tmp_path_factory.mktemp("built")
    folder = root / "cpa_pkg"
    folder.mkdir()
    for name, text in (("__init__", ""), ("settings", SETTINGS), ("helpers", HELPERS),
                       ("ops", OPS)):
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    sys.path.insert(0, str(root))
    try:
        ops = importlib.import_module("cpa_pkg.ops")
        result = run_check([Source("file", str(folder / "ops.py"), "cpa_pkg/ops.py")],
                           isolate=False)
        yield ops, {r["name"].split("::")[1]: r for r in result.rows}
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.split(".")[0] == "cpa_pkg"]:
            del sys.modules[name]


def test_the_project_builds_the_settings_and_theta_fits_them(package):
    ops, rows = package
    found = synthesize(ops.Velocity)
    assert isinstance(found, Synthesized)
    grid, theta, params = found.args
    assert isinstance(params.B, torch.Tensor) and params.B.shape == (8, 5)  # Field(4, "torch")
    assert theta.shape[-1] == 5 and grid.shape[0] == theta.shape[0]
    assert "Field(n_cells=4, backend='torch').params" in found.description


def test_a_correct_velocity_passes_and_its_gradient_is_autograds(package):
    ops, rows = package
    assert rows["Velocity"]["verdict"] == "pass", rows["Velocity"]["text"]
    grid, theta, params = synthesize(ops.Velocity).args
    x, t = grid.detach().clone().requires_grad_(), theta.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad(ops.Velocity.apply(x, t, params), (x, t), g)
    # the same field with plain torch ops, differentiated by autograd
    x2, t2 = grid.detach().clone().requires_grad_(), theta.detach().clone().requires_grad_()
    A = t2 @ params.B.T
    cell = (x2.detach() * params.nc).floor().clamp(0, params.nc - 1).long()
    v = A.gather(1, 2 * cell) * x2 + A.gather(1, 2 * cell + 1)
    expected = torch.autograd.grad(v, (x2, t2), g)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_a_backward_with_swapped_terms_fails(package):
    _, rows = package
    row = rows["VelocityWrong"]
    assert row["verdict"] == "fail" and "gradient-mismatch" in row["text"], row["text"]
