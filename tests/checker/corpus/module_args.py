"""nn.Module arguments (the tutorials' checkpointing pattern): the module's parameters are
inputs of the computation; a backward must give them their gradient (by accumulating it,
since apply returns gradients for its own arguments only)."""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from corpus import Case
from corpus import randn as _r


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 2)).double()


class Checkpoint(Function):
    """Recompute in backward; torch.autograd.backward accumulates into the parameters."""

    @staticmethod
    def forward(ctx, run_function, x):
        ctx.run_function = run_function
        ctx.save_for_backward(x)
        with torch.no_grad():
            return run_function(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.run_function(x)
        torch.autograd.backward(out, g)
        return None, x.grad


class CheckpointInputsOnly(Function):
    """torch.autograd.grad on the input only: the parameters never get a gradient."""

    @staticmethod
    def forward(ctx, run_function, x):
        ctx.run_function = run_function
        ctx.save_for_backward(x)
        with torch.no_grad():
            return run_function(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.run_function(x)
        (gx,) = torch.autograd.grad(out, x, g)
        return None, gx


class LinearModule(Function):
    """Applies an nn.Linear passed as an argument; backward returns the input's gradient
    from the weight and forgets the layer's own parameters."""

    @staticmethod
    def forward(ctx, layer, x):
        ctx.layer = layer
        return torch.nn.functional.linear(x, layer.weight, layer.bias)

    @staticmethod
    def backward(ctx, g):
        return None, g @ ctx.layer.weight


class CheckpointDoubledParams(Function):
    """Accumulates twice the parameters' gradient (backward on 2 g, input gradient halved)."""

    @staticmethod
    def forward(ctx, run_function, x):
        ctx.run_function = run_function
        ctx.save_for_backward(x)
        with torch.no_grad():
            return run_function(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.run_function(x)
        torch.autograd.backward(out, 2 * g)
        return None, x.grad / 2


class WeightsPassedAlong(Function):
    """The module's parameters are also passed to apply (so that apply returns their
    gradients), as reversible-network libraries do: they are one input, not two."""

    @staticmethod
    def forward(ctx, x, layer, *weights):
        ctx.layer = layer
        ctx.save_for_backward(x)
        with torch.no_grad():
            return layer(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(ctx.needs_input_grad[0])
        params = tuple(ctx.layer.parameters())
        wanted = [t for t in (x, *params) if t.requires_grad]
        with torch.enable_grad():
            out = ctx.layer(x)
        found = iter(torch.autograd.grad(out, wanted, g))
        grads = [next(found) if t.requires_grad else None for t in (x, *params)]
        return (grads[0], None, *grads[1:])


class WeightsPassedAlongFrozenCrash(WeightsPassedAlong):
    """Differentiates with respect to every parameter, frozen or not: crashes on a frozen one."""

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        params = tuple(ctx.layer.parameters())
        with torch.enable_grad():
            out = ctx.layer(x)
        grads = torch.autograd.grad(out, (x, *params), g)
        return (grads[0], None, *grads[1:])


def frozen_bias_linear():
    layer = torch.nn.Linear(3, 2).double()
    layer.bias.requires_grad_(False)
    return layer


def apply_module(module, x):
    """A plain callable: the parameters are in the autograd graph."""
    return module(x).tanh()


CASES = [
    Case("checkpoint-module", Checkpoint, lambda: (mlp(), _r(5, 3)), True),
    Case("checkpoint-module-inputs-only", CheckpointInputsOnly, lambda: (mlp(), _r(5, 3)),
         False, ("missing-param-grad",)),
    Case("linear-module-forgets-params", LinearModule,
         lambda: (torch.nn.Linear(3, 2).double(), _r(4, 3)), False, ("missing-param-grad",)),
    Case("checkpoint-module-doubled-params", CheckpointDoubledParams, lambda: (mlp(), _r(5, 3)),
         False, ("gradient-mismatch",)),
    Case("weights-passed-along", WeightsPassedAlong,
         lambda: (lambda m: (_r(4, 3).requires_grad_(), m, *m.parameters()))(
             torch.nn.Linear(3, 2).double()), True),
    Case("weights-passed-along-frozen-bias", WeightsPassedAlongFrozenCrash,
         lambda: (lambda m: (_r(4, 3).requires_grad_(), m, *m.parameters()))(
             frozen_bias_linear()), False, ("needs-input-grad-mismatch", "backward-error")),
    Case("callable-with-module", apply_module, lambda: (mlp(), _r(5, 3)), True),
    Case("checkpoint-frozen-module", CheckpointInputsOnly,
         lambda: (mlp().requires_grad_(False), _r(5, 3)), True),
]
