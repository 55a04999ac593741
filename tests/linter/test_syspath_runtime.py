"""A script that puts a package folder on sys.path itself (``sys.path.append("../kernels")``,
then ``from quant import double``) reaches linted code: GS215 follows the helper into the
package and finds its Triton launch (fixtures/syspath_dev8; lint corpus 8 dev's Jetfire
QModel_end_func, issue 19). Run in Triton's interpreter on CPU: the kernel's gradient is
right but carries no graph under create_graph=True, so the second derivative is silently
missing, while the torch helper of the same package keeps it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

pytest.importorskip("triton", reason="needs triton: pip install 'gradsmith[triton]'")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

ROOT = Path(__file__).parent / "fixtures" / "syspath_dev8"
MODEL = ROOT / "scripts" / "model.py"


@pytest.fixture(scope="module")
def model(load_fixture):
    from gradsmith._triton import interpreting, prepare

    if not prepare() and not interpreting() and not torch.cuda.is_available():
        pytest.skip("Triton kernels cannot run here (no interpreter, no GPU)")
    before = list(sys.path)
    try:
        yield load_fixture(MODEL, "gs_syspath_model")
    finally:
        sys.path[:] = before
        for name in [n for n in sys.modules if n == "quant" or n.startswith("quant.")]:
            del sys.modules[name]


def test_the_helper_behind_the_added_path_is_read():
    found = sorted((Path(f.path).name, f.line, f.code) for f in lint(ROOT, config=False)
                   if f.code == "GS215")
    assert found == [("literal.py", 20, "GS215"), ("model.py", 22, "GS215")]
    # alone, the package is not linted and nothing shows the helper runs a kernel
    assert not [f for f in lint(MODEL, config=False) if f.code == "GS215"]


def test_kernel_gradient_is_right_but_has_no_graph(model):
    torch.manual_seed(0)
    x = torch.randn(100, requires_grad=True)
    (reference,) = torch.autograd.grad((x * x).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(reference.sum(), x)  # 2 everywhere
    for fn, has_graph in ((model.KernelSquare.apply, False), (model.TorchSquare.apply, True)):
        (grad,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
        torch.testing.assert_close(grad, reference)
        assert (grad.grad_fn is not None) is has_graph
        if has_graph:
            torch.testing.assert_close(torch.autograd.grad(grad.sum(), x)[0], second)
