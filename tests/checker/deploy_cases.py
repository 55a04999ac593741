"""Functions for the deployment checks: each BROKEN_* one is correct in eager float64 and broken
for exactly one deployment reason (verified on torch 2.13.0 by tests/checker/test_deploy_*.py:
the plain-PyTorch failure is reproduced there without gradsmith); each OK_* one is correct and
compatible everywhere and must not be flagged.

Also a target for the command line: ``gradsmith check tests/checker/deploy_cases.py``.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch.autograd import Function

import gradsmith

_log = logging.getLogger("gradsmith.tests.deploy_cases")


def _x(*shape, low=-2.0, high=2.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=gen, dtype=torch.float64) * (high - low) + low)


class _Double(Function):
    """2x, the modern way: the template the broken ones deviate from in one place."""

    generate_vmap_rule = True

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return 2 * g


# --- compile ---------------------------------------------------------------------------------

@gradsmith.example(lambda: (_x(3, 4),))
class BrokenLoggingForward(_Double):
    """Logs from forward: Dynamo cannot trace logging.Logger calls (graph break); export can."""

    @staticmethod
    def forward(x):
        _log.debug("scaling %s", tuple(x.shape))  # the graph break
        return 2 * x


@gradsmith.example(lambda: (_x(3, 4),))
class BrokenItemBranch(_Double):
    """A Python branch on a tensor value: a graph break under compile, an error under export."""

    @staticmethod
    def forward(x):
        if x.abs().max().item() > 100.0:  # the graph break
            return 2 * x.clamp(-100, 100)
        return 2 * x


@gradsmith.example(lambda: (_x(3, 4),))
class BrokenCompilePath(_Double):
    """A 'fast path' taken only under Dynamo (torch.compile) that forgets a factor."""

    @staticmethod
    def forward(x):
        if torch.compiler.is_dynamo_compiling():
            return x + x * 0.5  # should be 2 * x
        return 2 * x


@gradsmith.example(lambda: (_x(3, 4),))
class BrokenClassmethodForward(Function):
    """forward/backward as @classmethod (fine in eager, as entmax writes them): Dynamo cannot
    bind them, so fullgraph compilation fails."""

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


# --- export ----------------------------------------------------------------------------------

@gradsmith.example(lambda: (_x(4, 5),), surrogate=lambda x: x.clamp(-1, 1))
class BrokenExportedSTE(Function):
    """Clipped straight-through sign: export keeps sign() only, whose gradient is zero."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.sign(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


@gradsmith.example(lambda: (_x(3, 4),))
class BrokenNumpyForward(_Double):
    """Computes through NumPy: Dynamo traces NumPy, torch.export cannot."""

    @staticmethod
    def forward(x):
        return torch.from_numpy(np.multiply(x.detach().numpy(), 2.0))


# --- autocast --------------------------------------------------------------------------------

@gradsmith.example(lambda: (_x(4, 3), _x(3, 5, seed=1)))
class BrokenAutocastMatmul(Function):
    """x @ w whose backward meets a bfloat16 grad with float32 saved inputs (no custom_bwd)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, w):
        return x @ w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g @ w.transpose(-1, -2) if ctx.needs_input_grad[0] else None
        gw = x.transpose(-1, -2) @ g if ctx.needs_input_grad[1] else None
        return gx, gw


@gradsmith.example(lambda: (_x(4, 3), _x(3, 5, seed=1)))
class OkAutocastMatmul(BrokenAutocastMatmul):
    """The same with the AMP decorators (setup_context carries custom_fwd for this style)."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g @ w.transpose(-1, -2) if ctx.needs_input_grad[0] else None
        gw = x.transpose(-1, -2) @ g if ctx.needs_input_grad[1] else None
        return gx, gw


@gradsmith.example(lambda: (_x(4, 3), _x(3, 5, seed=1)))
class OkAutocastCast(BrokenAutocastMatmul):
    """The device-independent fix: backward casts the incoming gradient to the saved dtype."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.to(w.dtype)  # forward may have returned bfloat16 under autocast
        gx = g @ w.transpose(-1, -2) if ctx.needs_input_grad[0] else None
        gw = x.transpose(-1, -2) @ g if ctx.needs_input_grad[1] else None
        return gx, gw


@gradsmith.example(lambda: (_x(4, 32) + 30.0,))
class BrokenAutocastGramVariance(Function):
    """Row variances from the Gram matrix's diagonal minus the squared mean: accurate in
    float32, but under autocast the matmul runs in bfloat16 (8 bits), whose error on
    E[x^2] ~ 900 is larger than the variance ~ 1 itself."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        n = x.shape[-1]
        return (x @ x.mT).diagonal(dim1=-2, dim2=-1) / n - x.mean(-1) ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.unsqueeze(-1).to(x.dtype) * 2 * (x - x.mean(-1, keepdim=True)) / x.shape[-1]


# --- low precision ---------------------------------------------------------------------------

def _offset(n=16, seed=0):
    return (_x(n, seed=seed) + 1000.0,)


@gradsmith.example(_offset)
class BrokenNaiveVariance(Function):
    """Variance as E[x^2] - E[x]^2: fine in float64, catastrophic cancellation in float32 for
    values around 1000 with spread 1 (the two terms agree to 6 digits)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return (x * x).mean(-1) - x.mean(-1) ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        n = x.shape[-1]
        return g.unsqueeze(-1) * 2 * (x - x.mean(-1, keepdim=True)) / n


@gradsmith.example(_offset)
class OkVariance(BrokenNaiveVariance):
    """The same variance in two passes: subtract the mean first."""

    @staticmethod
    def forward(x):
        return ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1)


@gradsmith.example(lambda: (_x(4, 6),))
class BrokenFloat32Internals(Function):
    """A mixing matrix created in float32: forward crashes for float64 inputs."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        mix = torch.full((x.shape[-1], x.shape[-1]), 0.5, dtype=torch.float32)
        return x @ mix

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        mix = torch.full((g.shape[-1], g.shape[-1]), 0.5, dtype=g.dtype)
        return g @ mix.transpose(-1, -2)


@gradsmith.example(lambda: (_x(4, 6),))
class BrokenFloat32Backward(Function):
    """Forward follows its input's dtype, backward mixes in a float32 matrix: the backward
    crashes in float64 only (what a float32 running statistic saved for backward does)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return 2 * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g @ (2 * torch.eye(g.shape[-1], dtype=torch.float32))


# --- checkpoint ------------------------------------------------------------------------------

@gradsmith.example(lambda: (_x(3, 4),))
class InplaceExp(Function):
    """exp computed in place (mark_dirty), correct in eager; not one reason but several:
    torch.compile (2.13) silently differentiates it as the identity, the recomputation under
    checkpoint finds its input overwritten, and forward(ctx, ...) keeps it from torch.func."""

    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


_PRIVATE = torch.Generator()


@gradsmith.example(lambda: (_x(3, 6),))
class BrokenPrivateGeneratorDropout(Function):
    """Dropout whose mask comes from a private torch.Generator: its backward is right for the
    mask it saved, but activation checkpointing replays only torch's default generator, so
    the recomputation saves another mask and the gradients are wrong."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        keep = (torch.rand(x.shape, generator=_PRIVATE, dtype=x.dtype) > 0.5).to(x.dtype)
        return x * keep * 2, keep

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])

    @staticmethod
    def backward(ctx, g, _g_keep):
        (keep,) = ctx.saved_tensors
        return g * keep * 2


# --- torch.func ------------------------------------------------------------------------------

@gradsmith.example(lambda: (_x(3, 4),))
class BrokenOldStyleTanh(Function):
    """forward(ctx, x): fine everywhere but torch.func, which needs setup_context."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


@gradsmith.example(lambda: (_x(3, 4),))
class BrokenNoVmapRule(Function):
    """setup_context style, but neither a vmap staticmethod nor generate_vmap_rule: grad, vjp
    and jacrev work, torch.func.vmap (per-sample gradients) refuses it."""

    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


# --- randomness under vmap (correct: must not be flagged) ------------------------------------

@gradsmith.example(lambda: (_x(3, 6),))
class OkDropout(Function):
    """Dropout with the mask as a non-differentiable output, vmap rule generated."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        keep = (torch.rand_like(x) > 0.5).to(x.dtype)
        return x * keep * 2, keep

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])

    @staticmethod
    def backward(ctx, g, _g_keep):
        (keep,) = ctx.saved_tensors
        return g * keep * 2


# --- correct and compatible everywhere -------------------------------------------------------

@gradsmith.example(lambda: (_x(3, 4), torch.tensor(1.5, dtype=torch.float64)))
class OkSwish(Function):
    """x * sigmoid(beta x), modern style, jvp included (so jacfwd is checked too)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, beta = inputs
        ctx.save_for_backward(x, beta)
        ctx.save_for_forward(x, beta)

    @staticmethod
    def backward(ctx, g):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        ds = s * (1 - s)
        gx = g * (s + beta * x * ds) if ctx.needs_input_grad[0] else None
        gb = (g * x * x * ds).sum().reshape(beta.shape) if ctx.needs_input_grad[1] else None
        return gx, gb

    @staticmethod
    def jvp(ctx, tx, tbeta):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        ds = s * (1 - s)
        return tx * (s + beta * x * ds) + tbeta * x * x * ds


# --- custom ops ------------------------------------------------------------------------------

def _sin_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _sin_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * torch.cos(x)


@torch.library.custom_op("gradsmith_deploy_cases::ok_sin", mutates_args=())
def ok_sin(x: torch.Tensor) -> torch.Tensor:
    """sin as a custom op with a fake kernel and an autograd formula."""
    return torch.sin(x)


ok_sin.register_fake(lambda x: torch.empty_like(x))
ok_sin.register_autograd(_sin_backward, setup_context=_sin_setup)
gradsmith.example(lambda: (_x(3, 4),))(ok_sin)


@torch.library.custom_op("gradsmith_deploy_cases::broken_no_fake_sin", mutates_args=())
def broken_no_fake_sin(x: torch.Tensor) -> torch.Tensor:
    """sin without a fake kernel: eager is fine, compile and export cannot trace it."""
    return torch.sin(x)


broken_no_fake_sin.register_autograd(_sin_backward, setup_context=_sin_setup)
gradsmith.example(lambda: (_x(3, 4),))(broken_no_fake_sin)


@torch.library.custom_op("gradsmith_deploy_cases::broken_fake_rowsum", mutates_args=())
def broken_fake_rowsum(x: torch.Tensor) -> torch.Tensor:
    """Row sums, whose fake kernel claims the input's shape."""
    return x.sum(-1)


broken_fake_rowsum.register_fake(lambda x: torch.empty_like(x))
broken_fake_rowsum.register_autograd(
    lambda ctx, g: g.unsqueeze(-1).expand(ctx.shape),
    setup_context=lambda ctx, inputs, output: setattr(ctx, "shape", inputs[0].shape))
gradsmith.example(lambda: (_x(3, 4),))(broken_fake_rowsum)
