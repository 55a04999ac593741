"""GS221 at run time: a Triton kernel that indexes grad_output as a dense tensor returns a
wrong gradient when the gradient arrives transposed or expanded, and the right one once
backward (or a decorator around it) makes it contiguous (fixtures/contig/_kern.py, run in Triton's interpreter on CPU).

Gradients are compared with autograd of the plain expression ``x * 2``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

pytest.importorskip("triton", reason="needs triton: pip install 'gradsmith[triton]'")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

FIXTURES = Path(__file__).parent / "fixtures" / "contig"


@pytest.fixture(scope="module")
def kern():
    from gradsmith._triton import interpreting, prepare

    if not prepare() and not interpreting() and not torch.cuda.is_available():
        pytest.skip("Triton kernels cannot run here (no interpreter, no GPU)")
    spec = importlib.util.spec_from_file_location("contig_kern_fixture", FIXTURES / "_kern.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function(helper):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return helper(g)

    return Double.apply


def _x():
    torch.manual_seed(0)
    return torch.randn(3, 4, requires_grad=True)


def _transposed(fn, x, w):
    """Loss through ``out.t()``: grad_output is ``w.t()``, strides (1, 3)."""
    return torch.autograd.grad((fn(x).t() * w).sum(), x)[0]


def _expanded(fn, x, w):
    """An expanded incoming gradient: one row of ``w`` repeated, stride 0 along dim 0."""
    return torch.autograd.grad(fn(x), x, grad_outputs=w[:1].expand(3, 4))[0]


@pytest.mark.parametrize("loss", [_transposed, _expanded], ids=["out.t()", "expand"])
def test_dense_kernel_gets_the_gradient_wrong_unless_made_contiguous(kern, loss):
    x = _x()
    torch.manual_seed(1)
    w = torch.randn(4, 3) if loss is _transposed else torch.randn(3, 4)
    want = loss(lambda t: t * 2, x, w)
    raw = loss(_function(kern.scaled_raw), x, w)
    assert not torch.allclose(raw, want), "the dense kernel read the strided gradient right"
    for fixed in (kern.scaled_contiguous, kern.made_contiguous(kern.scaled_raw)):
        torch.testing.assert_close(loss(_function(fixed), x, w), want)


def test_the_linter_warns_where_the_helper_launches_raw_only():
    """The raw launch above is reported where backward hands it grad_output, as a warning;
    the contiguous helper is not."""
    ops = (FIXTURES / "ops.py").read_text().splitlines()
    found = {(Path(f.path).name, ops[f.line - 1].strip(), f.severity)
             for f in lint(FIXTURES, config=False) if f.code == "GS221"}
    assert ("ops.py", "return scaled_raw(g.t()) + _local_raw(g)  # GS221", "warning") in found
    assert not any(line == "return scaled_contiguous(g)" for _, line, _ in found)
    assert {name for name, _, _ in found} == {"ops.py"}
