"""Functions on complex tensors (FFT-based, signal-processing, MRI-style operators).

PyTorch's gradient for a complex input is the conjugate Wirtinger derivative (what gradcheck
checks): for a holomorphic f, grad_z = grad_output * conj(f'(z)); a linear map's backward is
its adjoint. The classic bug is a missing .conj().
"""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


def _c(*shape, seed=0, dtype=torch.complex128):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


class ComplexMul(Function):
    @staticmethod
    def forward(ctx, z, a):
        ctx.save_for_backward(z, a)
        return z * a

    @staticmethod
    def backward(ctx, g):
        z, a = ctx.saved_tensors
        return g * a.conj(), g * z.conj()


class ComplexMulNoConj(Function):
    @staticmethod
    def forward(ctx, z, a):
        ctx.save_for_backward(z, a)
        return z * a

    @staticmethod
    def backward(ctx, g):
        z, a = ctx.saved_tensors
        return g * a, g * z


class FFT(Function):
    """y = F x (unnormalised DFT); backward is the adjoint F^H g = n ifft(g)."""

    @staticmethod
    def forward(ctx, x):
        return torch.fft.fft(x)

    @staticmethod
    def backward(ctx, g):
        return torch.fft.ifft(g, norm="forward")


class FFTForwardAsBackward(Function):
    """Uses F instead of its adjoint F^H (= conj(F), F being symmetric)."""

    @staticmethod
    def forward(ctx, x):
        return torch.fft.fft(x)

    @staticmethod
    def backward(ctx, g):
        return torch.fft.fft(g)


class RFFT(Function):
    """Real input, complex output: grad_x = Re(F^H pad(g))."""

    @staticmethod
    def forward(ctx, x):
        ctx.n = x.shape[-1]
        return torch.fft.rfft(x)

    @staticmethod
    def backward(ctx, g):
        full = torch.zeros(*g.shape[:-1], ctx.n, dtype=g.dtype)
        full[..., :g.shape[-1]] = g
        return torch.fft.ifft(full, norm="forward").real


class RFFTDropsImag(Function):
    """Keeps only the real part of g before the adjoint: wrong for every imaginary part."""

    @staticmethod
    def forward(ctx, x):
        ctx.n = x.shape[-1]
        return torch.fft.rfft(x)

    @staticmethod
    def backward(ctx, g):
        full = torch.zeros(*g.shape[:-1], ctx.n, dtype=g.dtype)
        full[..., :g.shape[-1]] = g.real
        return torch.fft.ifft(full, norm="forward").real


class AbsSquared(Function):
    """Complex in, real out: |z|^2, gradient 2 g z."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return (z * z.conj()).real

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z


class AbsSquaredConjugated(Function):
    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return (z * z.conj()).real

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z.conj()


class ComplexExpSavedOutput(Function):
    """exp(z) saving its output: right in first and second order."""

    @staticmethod
    def forward(ctx, z):
        y = z.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y.conj()


class ComplexExpDetached(Function):
    """Right first order, but backward detaches: its second derivative silently 0 (a
    double-backward-unsupported warning, issue 18)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z.exp()

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * z.exp().detach().conj()


CASES = [
    Case("complex-mul", ComplexMul, lambda: (_c(5), _c(5, seed=1)), True),
    Case("complex-mul-no-conj", ComplexMulNoConj, lambda: (_c(5), _c(5, seed=1)), False,
         ("gradient-mismatch",)),
    Case("complex-fft", FFT, lambda: (_c(6),), True),
    Case("complex-fft-no-adjoint", FFTForwardAsBackward, lambda: (_c(6),), False,
         ("gradient-mismatch",)),
    Case("complex-rfft", RFFT, lambda: (_r(2, 8),), True),
    Case("complex-rfft-drops-imag", RFFTDropsImag, lambda: (_r(2, 8),), False,
         ("gradient-mismatch",)),
    Case("complex-abs-squared", AbsSquared, lambda: (_c(5),), True),
    Case("complex-abs-squared-conjugated", AbsSquaredConjugated, lambda: (_c(5),), False,
         ("gradient-mismatch",)),
    Case("complex64-mul", ComplexMul,
         lambda: (_c(5, dtype=torch.complex64), _c(5, seed=1, dtype=torch.complex64)), True),
    Case("complex-exp-saved-output", ComplexExpSavedOutput, lambda: (_c(4),), True),
    Case("complex-exp-detached", ComplexExpDetached, lambda: (_c(4),), True,
         ("double-backward-unsupported",)),
]
