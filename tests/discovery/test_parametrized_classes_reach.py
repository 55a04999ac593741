"""A test parametrized over a module-level list of the project's classes reaches the Function.

Corpus 14c dev (sparse_continuous_distributions ``ContinuousEntmaxFunction``, judged correct,
a skip): forward takes basis-function objects and a kernel object that only the project builds;
its gradcheck test is ``@pytest.mark.parametrize('Cls', classes)`` with ``classes =
[ContinuousSoftmax, ...]`` at module level, and its body names ``Cls`` only, so no test was
found to reach the Function. Module-level names assigned from callers now count as reaching it.
Reduced project written here: the right Function PASSes on the test's objects (its gradient
equals autograd of the plain expression, the reference); a planted wrong backward FAILs.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

KERNELS = '''
import torch
import torch.nn as nn


class Basis:
    """Only the project makes these: centres and widths of Gaussian bumps."""

    def __init__(self, mus, sigmas):
        self.mus, self.sigmas = mus, sigmas


class Bumps(torch.autograd.Function):
    @staticmethod
    def forward(ctx, theta, psi, scale):
        z = (theta[:, None] - psi[0].mus) / psi[0].sigmas
        ctx.save_for_backward(z)
        ctx.psi, ctx.scale = psi, scale
        return scale.factor * torch.exp(-0.5 * z ** 2)

    @staticmethod
    def backward(ctx, g):
        z, = ctx.saved_tensors
        d = -ctx.scale.factor * z * torch.exp(-0.5 * z ** 2) / ctx.psi[0].sigmas
        return {grad}, None, None


class Scale:
    def __init__(self, factor):
        self.factor = factor


class Wide(nn.Module):
    def __init__(self, psi=None):
        super().__init__()
        self.psi, self.scale = psi, Scale(2.0)

    def forward(self, theta):
        return Bumps.apply(theta, self.psi, self.scale)


class Narrow(nn.Module):
    def __init__(self, psi=None):
        super().__init__()
        self.psi, self.scale = psi, Scale(0.5)

    def forward(self, theta):
        return Bumps.apply(theta, self.psi, self.scale)
'''

TESTS = '''
import pytest
import torch

from {pkg}.kernels import Basis, Narrow, Wide

bases = [Basis(torch.linspace(0, 1, 4, dtype=torch.float64),
               torch.full((4,), 0.3, dtype=torch.float64))]
classes = [Wide, Narrow]


@pytest.mark.parametrize("Cls", classes)
@pytest.mark.parametrize("basis", bases)
def test_gradcheck(Cls, basis):
    module = Cls(psi=[basis])
    theta = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(module, theta)
'''

RIGHT, WRONG = "(g * d).sum(1)", "(g * d).sum(1) * 1.2"


@pytest.fixture
def project(tmp_path, monkeypatch, request):
    def make(grad: str):
        pkg = f"pcr_{request.node.name[-8:]}_{len(grad)}"
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
        (tmp_path / pkg / "kernels.py").write_text(KERNELS.replace("{grad}", grad))
        (tmp_path / pkg / "test_kernels.py").write_text(TESTS.replace("{pkg}", pkg))
        made.append(pkg)
        return pkg

    made: list[str] = []
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, make
    for pkg in made:
        for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
            del sys.modules[name]


def test_the_reference():
    namespace: dict = {}
    exec(textwrap.dedent(KERNELS.replace("{grad}", RIGHT)), namespace)  # noqa: S102
    basis = namespace["Basis"](torch.linspace(0, 1, 4, dtype=torch.float64),
                               torch.full((4,), 0.3, dtype=torch.float64))
    theta = torch.randn(5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, dtype=torch.float64)
    got = torch.autograd.grad((namespace["Wide"](psi=[basis])(theta) * w).sum(), theta)[0]
    z = (theta[:, None] - basis.mus) / basis.sigmas
    want = torch.autograd.grad((2.0 * torch.exp(-0.5 * z ** 2) * w).sum(), theta)[0]
    torch.testing.assert_close(got, want)


def test_a_test_parametrized_over_a_list_of_callers_gives_the_inputs(project):
    root, make = project
    for grad, verdict in ((RIGHT, "pass"), (WRONG, "fail")):
        pkg = make(grad)
        result = run_check([Source("file", str(root / pkg / "kernels.py"),
                                   f"{pkg}/kernels.py::Bumps")], isolate=False)
        (row,) = result.rows
        assert row["verdict"] == verdict, row
        assert "`test_gradcheck` in test_kernels.py" in row["inputs"], row["inputs"]
        if verdict == "fail":
            assert "gradient-mismatch" in {f["code"] for f in row["report"]["findings"]
                                           if f["severity"] == "error"}
