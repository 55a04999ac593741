"""An object argument whose methods forward calls (``static_kernel.Gram_matrix(X, Y)``, issue 18,
corpus 8a held-out: a signature kernel's static kernel) is one of the project's own classes that
defines those methods, built with its defaults, not an invented namespace whose methods return
their first argument. Reduced case written here (a package of two modules); a wrong backward
still fails.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize

KERNELS = """
    import torch


    class ScaledLinear:
        def __init__(self, scale=2.0):
            self.scale = scale

        def Gram_matrix(self, X, Y):
            return self.scale * torch.einsum("amd,bnd->abmn", X, Y)

        def vjp(self, g, Y):
            return self.scale * torch.einsum("ab,bnd->ad", g, Y)


    class Needs:
        def __init__(self, sigma):  # a required object: nothing says how to build it
            self.sigma = sigma

        def Gram_matrix(self, X, Y):
            raise AssertionError("never built")
"""

GRAM = """
    import torch


    class Gram(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, Y, static_kernel):
            ctx.save_for_backward(X, Y)
            ctx.kernel = static_kernel
            return static_kernel.Gram_matrix(X, Y).sum(dim=(2, 3))

        @staticmethod
        def backward(ctx, g):
            X, Y = ctx.saved_tensors
            if RIGHT:
                gx, gy = ctx.kernel.vjp(g, Y), ctx.kernel.vjp(g.T, X)
            else:  # the kernel's scale forgotten
                gx, gy = torch.einsum("ab,bnd->ad", g, Y), torch.einsum("ab,amd->bd", g, X)
            return gx[:, None].expand_as(X), gy[:, None].expand_as(Y), None
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    def make(right: bool):
        name = f"kernpkg_{'right' if right else 'wrong'}"
        folder = tmp_path / name
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        (folder / "kernels.py").write_text(textwrap.dedent(KERNELS))
        (folder / "gram.py").write_text(textwrap.dedent(GRAM).replace("RIGHT", str(right)))
        monkeypatch.syspath_prepend(str(tmp_path))
        module = importlib.import_module(f"{name}.gram")
        kernels = importlib.import_module(f"{name}.kernels")
        return module.Gram, kernels.ScaledLinear

    yield make
    for name in [n for n in sys.modules if n.startswith("kernpkg_")]:
        del sys.modules[name]


def test_an_object_whose_method_forward_calls_is_the_projects_own_and_passes(package):
    gram, linear = package(True)
    found = synthesize(gram)
    assert isinstance(found, Synthesized), found
    X, Y, kernel = found.args
    assert type(kernel) is linear and kernel.scale == 2.0
    assert "ScaledLinear()" in found.description
    # reference: autograd of the same Gram matrix written with plain torch
    g = torch.randn(X.shape[0], Y.shape[0], dtype=torch.float64)
    got = torch.autograd.grad(gram.apply(X, Y, kernel), (X, Y), g)
    x, y = X.detach().requires_grad_(), Y.detach().requires_grad_()
    want = torch.autograd.grad(2.0 * torch.einsum("amd,bnd->ab", x, y), (x, y), g)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(gram, *found.args).passed


def test_a_backward_forgetting_the_kernels_scale_fails(package):
    gram, _ = package(False)
    found = synthesize(gram)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(gram, *found.args)
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")
