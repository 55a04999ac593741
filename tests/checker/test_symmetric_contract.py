"""A Function the code says takes symmetric matrices, and whose forward reads both triangles,
is compared along symmetric directions (issue 18, corpus 8 held-out reading: fast-MPN-COV's
Newton-Schulz square root returns the transpose of the unrestricted gradient, exact along every
symmetric direction, and was a false gradient-mismatch). A backward wrong along symmetric
directions still fails. Reference: autograd through the same iterations, on symmetric
perturbations."""

import torch

import gradsmith


def _ns_sqrt(x, iters):
    n = x.shape[-1]
    eye = torch.eye(n, dtype=x.dtype).expand_as(x)
    norm = (x * eye).sum(dim=(-2, -1), keepdim=True)  # the trace
    y, z = x / norm, eye.clone()
    for _ in range(iters):
        t = 0.5 * (3 * eye - z.bmm(y))
        y, z = y.bmm(t), t.bmm(z)
    return y * norm.sqrt()


def _sylvester(s, g):
    """X with s X + X s = g, for symmetric positive definite s."""
    w, u = torch.linalg.eigh(s)
    return u @ (u.mT @ g @ u / (w[..., :, None] + w[..., None, :])) @ u.mT


class Sqrtm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, iterN):
        """input: a batch of symmetric positive definite matrices (b, n, n)."""
        s = _ns_sqrt(input, iterN)
        ctx.save_for_backward(s)
        return s

    @staticmethod
    def backward(ctx, grad_output):
        (s,) = ctx.saved_tensors
        return _sylvester(s, grad_output).mT, None  # transposed: equal on symmetric directions


class SqrtmDoubled(Sqrtm):
    @staticmethod
    def backward(ctx, grad_output):
        (s,) = ctx.saved_tensors
        return 2 * _sylvester(s, grad_output).mT, None


class SqrtmSymmetricPartWrong(Sqrtm):
    @staticmethod
    def backward(ctx, grad_output):
        (s,) = ctx.saved_tensors
        return _sylvester(s, grad_output.mT @ s), None


def _spd():
    b = torch.randn(2, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return b @ b.mT + 4 * torch.eye(4, dtype=torch.float64)


def test_the_transposed_gradient_is_exact_along_symmetric_directions():
    a = _spd()
    e = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    e = e + e.mT  # a symmetric direction
    g = torch.randn(2, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x = a.clone().requires_grad_(True)
    (mine,) = torch.autograd.grad(Sqrtm.apply(x, 30), x, g)
    x = a.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(_ns_sqrt(x, 30), x, g)
    torch.testing.assert_close((mine * e).sum(), (ref * e).sum())
    assert not torch.allclose(mine, ref, atol=1e-6)  # entry by entry they differ


def test_stated_symmetric_input_passes_and_wrong_ones_fail():
    report = gradsmith.check(Sqrtm, _spd(), 30)
    assert report.passed, report
    assert "symmetric-directions" in report.codes()
    for wrong in (SqrtmDoubled, SqrtmSymmetricPartWrong):
        report = gradsmith.check(wrong, _spd(), 30)
        assert "gradient-mismatch" in report.codes("error"), (wrong.__name__, report)
