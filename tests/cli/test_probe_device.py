"""A ``torch.set_default_device(...)`` in user code (in forward, or at import) moves neither
gradsmith's own tensors (random grad_outputs, directions), which follow the inputs' device,
nor the caller's default device: a correct Function still passes on CPU inputs."""

from __future__ import annotations

import torch

import gradsmith

SETS_DEVICE = '''
@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),))
class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        torch.set_default_device("meta")
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad
'''


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        torch.set_default_device("meta")
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


def test_default_device_set_in_forward_does_not_move_probe_tensors(write, gradsmith_cli):
    write("sets_device.py", SETS_DEVICE)
    code, out, _ = gradsmith_cli("sets_device.py", "--no-compat", "--timeout", "120")
    assert code == 0, out
    assert "1 passed, 0 failed" in out


SETS_DEVICE_AT_IMPORT = '''
torch.set_default_device("meta")  # user code's own choice, at import time


@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, device="cpu",
                                        requires_grad=True),))
class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad
'''


def test_default_device_set_at_import_does_not_move_probe_tensors(write, gradsmith_cli):
    write("sets_device_at_import.py", SETS_DEVICE_AT_IMPORT)
    code, out, _ = gradsmith_cli("sets_device_at_import.py", "--no-compat", "--timeout", "120")
    assert code == 0, out
    assert "1 passed, 0 failed" in out


def test_check_leaves_the_callers_default_device() -> None:
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    try:
        report = gradsmith.check(_Cube, x)
        after = torch.get_default_device()
    finally:
        torch.set_default_device(None)
    assert report.passed, str(report)
    assert after == torch.device("cpu")
    # the reference: autograd of the same expression
    (grad,) = torch.autograd.grad((x ** 3).sum(), x)
    (mine,) = torch.autograd.grad(_Cube.apply(x).sum(), x)
    torch.set_default_device(None)
    torch.testing.assert_close(mine, grad)
